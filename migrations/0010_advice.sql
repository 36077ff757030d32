-- Advice at submission: the users who turned it off. A row means "off"; deleting it turns advice
-- back on. Keyed by the user name as slurmdbd's associations name them.
CREATE TABLE advice_opt_outs (
    user        VARCHAR(64)  NOT NULL PRIMARY KEY,
    opted_out_at DATETIME(3) NOT NULL
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
