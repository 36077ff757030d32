//! `POST /api/v1/gpu_allocations`: the Slurm plugin's job → GPU records, authenticated with the cluster's
//! secret, validated field by field, stored idempotently (a replayed record changes nothing).
//! `GET /api/v1/jobs/{job_id}/gpus`: what was recorded for one job, for viewers who may see the job.

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use slurmlens_wire as wire;

use super::HttpState;
use super::error::ApiError;
use super::params::{Params, QueryPairs, pairs};
use crate::app::ingest::{Sender, is_node_name};
use crate::app::{App, Viewer};
use crate::config::IngestConfig;
use crate::domain::cluster::ClusterName;

/// Largest body accepted: a spool delivery sends at most a few hundred records per request.
pub const MAX_BODY_BYTES: usize = 1 << 20;
/// Shortest secret accepted in the configuration.
const MIN_SECRET_LEN: usize = 16;

/// The clusters' ingest secrets, checked in constant time.
#[derive(Clone, Default)]
pub struct IngestSecrets {
    by_cluster: Vec<(ClusterName, Vec<u8>)>,
    /// The clusters whose nodes hold secrets of their own ([`node_secret`]).
    per_node: Vec<ClusterName>,
}

/// A node's own secret on a cluster with `[ingest] node_secrets`: the hex HMAC-SHA256 of the node's name,
/// keyed with the cluster's secret. Sent as `<node>:<hex>`.
pub fn node_secret(cluster_secret: &[u8], node: &str) -> String {
    use hmac::{Hmac, Mac};
    let mut mac = <Hmac<sha2::Sha256> as Mac>::new_from_slice(cluster_secret).expect("HMAC takes a key of any length");
    mac.update(node.as_bytes());
    mac.finalize().into_bytes().iter().map(|byte| format!("{byte:02x}")).collect()
}

impl IngestSecrets {
    /// Validates the configured secrets: known clusters only, long enough, never shared by two clusters.
    pub fn from_config(config: &IngestConfig, clusters: &[ClusterName]) -> Result<Self, String> {
        let mut by_cluster: Vec<(ClusterName, Vec<u8>)> = Vec::new();
        for (name, secret) in &config.secrets {
            let cluster: ClusterName = name.parse().map_err(|e| format!("[ingest.secrets] {e}"))?;
            if !clusters.contains(&cluster) {
                return Err(format!("[ingest.secrets] names `{name}`, which is not in `clusters`"));
            }
            if secret.0.trim().len() < MIN_SECRET_LEN {
                return Err(format!(
                    "[ingest.secrets] the secret of `{name}` is shorter than {MIN_SECRET_LEN} characters"
                ));
            }
            let bytes = secret.0.trim().as_bytes().to_vec();
            if by_cluster.iter().any(|(_, other)| *other == bytes) {
                return Err(format!("[ingest.secrets] `{name}` shares its secret with another cluster"));
            }
            by_cluster.push((cluster, bytes));
        }
        let mut per_node = Vec::new();
        for name in &config.node_secrets {
            let cluster: ClusterName = name.parse().map_err(|e| format!("[ingest] node_secrets: {e}"))?;
            if !by_cluster.iter().any(|(known, _)| *known == cluster) {
                return Err(format!("[ingest] node_secrets names `{name}`, which has no [ingest.secrets] entry"));
            }
            per_node.push(cluster);
        }
        Ok(Self { by_cluster, per_node })
    }

    /// Who a bearer `token` speaks for: a cluster (its secret), or one node of a cluster with node
    /// secrets (`<node>:<hex HMAC>`). Every candidate secret is compared in full, whatever matches.
    fn sender_for(&self, token: &[u8]) -> Option<Sender> {
        let cluster_wide = self.cluster_for(token).cloned().map(Sender::cluster_wide);
        let node = std::str::from_utf8(token)
            .ok()
            .and_then(|text| text.split_once(':'))
            .filter(|(node, _)| is_node_name(node));
        let mut found = None;
        if let Some((node, mac)) = node {
            for (cluster, secret) in &self.by_cluster {
                if self.per_node.contains(cluster)
                    && same_secret(mac.as_bytes(), node_secret(secret, node).as_bytes())
                    && found.is_none()
                {
                    found = Some(Sender { cluster: cluster.clone(), node: Some(node.to_string()) });
                }
            }
        }
        cluster_wide.or(found)
    }

    /// The cluster whose secret `token` is. Every secret is compared in full, whatever matches.
    fn cluster_for(&self, token: &[u8]) -> Option<&ClusterName> {
        let mut found = None;
        for (cluster, secret) in &self.by_cluster {
            if same_secret(token, secret) && found.is_none() {
                found = Some(cluster);
            }
        }
        found
    }
}

/// Compares in time that depends only on the expected secret's length.
pub(super) fn same_secret(given: &[u8], expected: &[u8]) -> bool {
    let mut difference = given.len() ^ expected.len();
    for (at, byte) in expected.iter().enumerate() {
        difference |= usize::from(byte ^ given.get(at).copied().unwrap_or(0));
    }
    std::hint::black_box(difference) == 0
}

fn unauthorized(message: &str) -> Response {
    let mut response = ApiError::Unauthorized(message.into()).into_response();
    response.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// Answers an ingest request: who the bearer secret speaks for (else the 401), then `ingest`'s
/// receipt as JSON or its error envelope.
pub(crate) async fn answer_authenticated<T, F>(state: &HttpState, headers: &HeaderMap, ingest: F) -> Response
where
    T: serde::Serialize,
    F: AsyncFnOnce(Sender) -> Result<T, ApiError>,
{
    let sender = match authenticated_sender(state, headers) {
        Ok(sender) => sender,
        Err(response) => return *response,
    };
    match ingest(sender).await {
        Ok(receipt) => Json(receipt).into_response(),
        Err(error) => error.into_response(),
    }
}

/// Who the request's `Authorization: Bearer` secret speaks for (a cluster, or one node of it), or the
/// 401 to answer.
pub(crate) fn authenticated_sender(state: &HttpState, headers: &HeaderMap) -> Result<Sender, Box<Response>> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim());
    let Some(token) = token else {
        return Err(Box::new(unauthorized("send `Authorization: Bearer <the cluster's ingest secret>`")));
    };
    let Some(sender) = state.ingest.sender_for(token.as_bytes()) else {
        return Err(Box::new(unauthorized("the ingest secret is not valid for any cluster or node")));
    };
    Ok(sender)
}

/// `POST /api/v1/gpu_allocations`: `{"records": [...]}`; 200 with the count stored.
#[utoipa::path(
    post,
    path = "/api/v1/gpu_allocations",
    tag = "ingest",
    operation_id = "post_gpu_allocations",
    summary = "The Slurm plugin's job → GPU records",
    description = "Records from the SPANK plugin's job prolog/epilog: which GPU indices a job got on a node, \
        when it started or ended. Authenticated with the cluster's ingest secret; every record must name \
        that cluster (and, with a node's own secret, that node). Validated field by field: the valid \
        records are stored and each refused one is named in `rejected` (its index, the field, e.g. \
        `records[3].gpus`, and why); a batch with no valid record is a 400 naming the first bad field. \
        Stored idempotently: a replayed record changes nothing. At most 1000 records and 1 MiB.",
    request_body(content = wire::GpuAllocationBatch, description = "1 to 1000 records", content_type = "application/json"),
    responses(
        (status = 200, description = "The valid records stored; the others named in `rejected`", body = wire::GpuAllocationReceipt),
        (status = 400, description = "Not a batch, or no record is valid (`invalid_parameter`, naming the first bad field); nothing is stored", body = wire::ErrorEnvelope),
        (status = 401, description = "No ingest secret, or not one of any cluster (`unauthorized`)", body = wire::ErrorEnvelope,
            headers(("WWW-Authenticate" = String, description = "`Bearer`"))),
        (status = 503, description = "slurmlens's database does not answer, or none is configured (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("ingest_secret" = [])),
)]
pub async fn post_gpu_allocations(State(state): State<HttpState>, headers: HeaderMap, body: Body) -> Response {
    answer_authenticated(&state, &headers, async |sender| {
        let batch = decode_batch(body).await?;
        Ok(state.app().ingest_gpu_allocations(&sender, &batch).await?)
    })
    .await
}

/// The body as a batch of GPU records, or a 400 naming the first field that is not.
async fn decode_batch(body: Body) -> Result<wire::GpuAllocationBatch, ApiError> {
    let bytes = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| ApiError::invalid("body", format!("the body is larger than {MAX_BODY_BYTES} bytes")))?;
    let mut deserializer = serde_json::Deserializer::from_slice(&bytes);
    let batch: wire::GpuAllocationBatch = serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let path = e.path().to_string();
        let field = if path == "." { "body".to_string() } else { path };
        ApiError::invalid(&field, format!("not a GPU allocation batch: {}", e.inner()))
    })?;
    deserializer.end().map_err(|e| ApiError::invalid("body", format!("text after the JSON document: {e}")))?;
    Ok(batch)
}

/// `GET /api/v1/jobs/{job_id}/gpus?cluster=`: the GPUs recorded for a job the viewer may see.
#[utoipa::path(
    get,
    path = "/api/v1/jobs/{job_id}/gpus",
    tag = "jobs",
    operation_id = "job_gpus",
    summary = "The GPUs the Slurm plugin recorded for a job",
    description = "GPU indices (with UUIDs and the cgroup, when known) the Slurm plugin recorded for the job on \
        each node, per step. A job the viewer may not see is a 404, like a missing one.",
    params(
        ("job_id" = String, Path, description = "`123`, `123_4` (array task) or `8+1` (het component)."),
        ("cluster" = Option<String>, Query, description = "Cluster name; default: the first configured cluster."),
    ),
    responses(
        (status = 200, description = "The recorded GPUs (empty without plugin records)", body = wire::JobGpus),
        (status = 400, description = "Not a job id, or a bad parameter (`invalid_parameter`)", body = wire::ErrorEnvelope),
        (status = 404, description = "No such job, or one the viewer may not see (`not_found`)", body = wire::ErrorEnvelope),
        (status = 503, description = "slurmdbd's or slurmlens's database does not answer, or none is configured (`source_unavailable`)", body = wire::ErrorEnvelope),
    ),
    security(("token" = []), ("user_header" = [])),
)]
pub async fn job_gpus(
    State(app): State<App>,
    Extension(viewer): Extension<Viewer>,
    Path(job_id): Path<String>,
    query: QueryPairs,
) -> Result<Json<wire::JobGpus>, ApiError> {
    let params = Params::new(pairs(query)?, &["cluster"])?;
    Ok(Json(app.job_gpus(&viewer, params.text("cluster"), &job_id).await?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::IngestSecret;

    #[test]
    fn compares_secrets_fully() {
        assert!(same_secret(b"0123456789abcdef", b"0123456789abcdef"));
        assert!(!same_secret(b"0123456789abcdeX", b"0123456789abcdef"));
        assert!(!same_secret(b"0123456789abcde", b"0123456789abcdef"));
        assert!(!same_secret(b"0123456789abcdef0", b"0123456789abcdef"));
        assert!(!same_secret(b"", b"0123456789abcdef"));
    }

    #[test]
    fn validates_configured_secrets() {
        let clusters: Vec<ClusterName> = vec!["lab".parse().expect("valid"), "sakura".parse().expect("valid")];
        let config = |pairs: &[(&str, &str)]| IngestConfig {
            secrets: pairs.iter().map(|(name, secret)| (name.to_string(), IngestSecret(secret.to_string()))).collect(),
            node_secrets: Vec::new(),
        };
        let secrets = IngestSecrets::from_config(&config(&[("lab", "lab-secret-0123456789")]), &clusters).expect("ok");
        assert_eq!(secrets.cluster_for(b"lab-secret-0123456789").map(ClusterName::as_str), Some("lab"));
        assert_eq!(secrets.cluster_for(b"lab-secret-012345678"), None);
        assert!(IngestSecrets::from_config(&config(&[("lab", "short")]), &clusters).is_err());
        assert!(IngestSecrets::from_config(&config(&[("other", "lab-secret-0123456789")]), &clusters).is_err());
        let shared = config(&[("lab", "same-secret-0123456789"), ("sakura", "same-secret-0123456789")]);
        assert!(IngestSecrets::from_config(&shared, &clusters).is_err());
        let mut unknown = config(&[("lab", "lab-secret-0123456789")]);
        unknown.node_secrets = vec!["sakura".into()];
        assert!(IngestSecrets::from_config(&unknown, &clusters).is_err(), "node secrets of a cluster without a secret");
    }

    #[test]
    fn a_node_secret_speaks_for_its_node_only_where_the_site_gives_nodes_their_own() {
        let clusters: Vec<ClusterName> = vec!["lab".parse().expect("valid"), "sakura".parse().expect("valid")];
        let mut config = IngestConfig {
            secrets: [("lab", "lab-secret-0123456789"), ("sakura", "sakura-secret-0123456789")]
                .into_iter()
                .map(|(name, secret)| (name.to_string(), IngestSecret(secret.to_string())))
                .collect(),
            node_secrets: vec!["lab".into()],
        };
        let secrets = IngestSecrets::from_config(&config, &clusters).expect("valid");
        // What `printf %s n1 | openssl dgst -sha256 -hmac lab-secret-0123456789` prints.
        assert_eq!(
            node_secret(b"lab-secret-0123456789", "n1"),
            "252d9957789d43d2ee47df52dbeeb2087b336afdea8dbebc8b30d7ef70c6e354"
        );
        let n1 = format!("n1:{}", node_secret(b"lab-secret-0123456789", "n1"));
        let sender = secrets.sender_for(n1.as_bytes()).expect("n1's secret");
        assert_eq!((sender.cluster.as_str(), sender.node.as_deref()), ("lab", Some("n1")));
        assert_eq!(secrets.sender_for(n1.replacen("n1:", "n2:", 1).as_bytes()), None, "another node's name");
        let sakura = format!("n1:{}", node_secret(b"sakura-secret-0123456789", "n1"));
        assert_eq!(secrets.sender_for(sakura.as_bytes()), None, "sakura's nodes have no secrets of their own");
        let cluster = secrets.sender_for(b"lab-secret-0123456789").expect("the cluster's secret");
        assert_eq!(cluster.node, None);
        config.node_secrets.clear();
        let without = IngestSecrets::from_config(&config, &clusters).expect("valid");
        assert_eq!(without.sender_for(n1.as_bytes()), None);
    }
}
