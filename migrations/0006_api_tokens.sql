-- Personal API tokens: a signed-in user creates and revokes them for themselves. Only the SHA-256 of
-- a token is kept; the token itself is shown once, at creation.
CREATE TABLE api_tokens (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    user_name VARCHAR(64) NOT NULL,
    name VARCHAR(64) NOT NULL,
    token_sha256 CHAR(64) NOT NULL,
    created_at DATETIME(3) NOT NULL,
    expires_at DATETIME(3) NOT NULL,
    revoked_at DATETIME(3) NULL,
    last_used_at DATETIME(3) NULL,
    UNIQUE KEY token_sha256 (token_sha256),
    KEY by_user (user_name, created_at)
);

-- Every request made with a token, answered or refused (rate limit included).
CREATE TABLE api_token_uses (
    id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT PRIMARY KEY,
    token_id BIGINT UNSIGNED NOT NULL,
    used_at DATETIME(3) NOT NULL,
    method VARCHAR(8) NOT NULL,
    path VARCHAR(512) NOT NULL,
    status SMALLINT UNSIGNED NOT NULL,
    peer VARCHAR(64) NOT NULL,
    KEY by_token (token_id, used_at)
);
