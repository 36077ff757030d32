//! A job's own output: the tail of its standard output and error files (`/api/v1/jobs/{id}/output`).

use serde::{Deserialize, Serialize};

/// `GET /api/v1/jobs/{job_id}/output`: where the job's output went, and its last lines where the site
/// lets slurmlens read them.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobOutput {
    pub job_id: String,
    pub cluster: String,
    /// Standard output first; standard error only where it went to a file of its own.
    pub files: Vec<OutputFile>,
}

/// One of a job's output files.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OutputFile {
    /// `output` (standard output, and standard error where it was not named apart) or `error`.
    pub stream: OutputStream,
    /// The file, absolute; absent for `/dev/null`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Where its name came from: `slurmdbd`, `submit_line`, `script` or `default` (`slurm-%j.out`).
    pub named: OutputNamed,
    /// `read`, `discarded`, `not_allowed` (outside the site's `[job_output] roots`), `missing`,
    /// `not_the_owners`, `not_a_file`, `failed` or `withheld` (the viewer is neither its owner nor staff).
    pub state: OutputState,
    /// Its last lines, when read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tail: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// Whether the file holds more than `tail`.
    #[serde(default)]
    pub truncated: bool,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum OutputStream {
    Output,
    Error,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum OutputNamed {
    Slurmdbd,
    SubmitLine,
    Script,
    Default,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum OutputState {
    Read,
    Discarded,
    NotAllowed,
    Missing,
    NotTheOwners,
    NotAFile,
    Failed,
    Withheld,
}
