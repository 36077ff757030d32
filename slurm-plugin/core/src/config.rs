//! The plugins' configuration file: `key = value` lines (a subset of TOML), read afresh by every hook so
//! a change applies to the next job without restarting anything.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Where the plugins look when nothing names a file: next to `slurm.conf`.
pub const FILE_NAME: &str = "slurmlens-plugin.conf";

/// Settings of the cli_filter and SPANK plugins.
#[derive(Debug, Clone, PartialEq)]
pub struct PluginConfig {
    /// Base URL users open (links: `<public_url>/jobs/<id>`).
    pub public_url: String,
    /// Base URL the nodes post records to (`http://` only); defaults to `public_url`.
    pub ingest_url: String,
    /// Cluster name sent with records; defaults to `SLURM_CLUSTER_NAME` of the job.
    pub cluster: Option<String>,
    /// A file (root-only) holding the cluster's ingest secret; without it nothing is sent.
    pub secret_file: Option<PathBuf>,
    /// Node-local folder for records the server did not take.
    pub spool_dir: PathBuf,
    /// The spool stops growing here; newer records are dropped (and logged).
    pub spool_max_bytes: u64,
    /// Everything one hook does (nvidia-smi, HTTP, spool delivery) ends within this.
    pub timeout: Duration,
    pub connect_timeout: Duration,
    /// Template of the job's cgroup path: `%j` job id, `%u` uid, `%n` node name.
    pub cgroup_path: Option<String>,
    /// dcgm-exporter's `--hpc-job-mapping-dir`: files named by GPU index holding job ids.
    pub dcgm_job_map_dir: Option<PathBuf>,
    /// Path of `nvidia-smi`; `None` = look in the usual places, `Some("")` = never run it.
    pub nvidia_smi: Option<PathBuf>,
    /// Print the report link at the top of batch jobs' output.
    pub link_in_output: bool,
    /// Ask for advice at submission (`advice = on|off`; users silence it with `SLURMLENS_ADVICE=off`).
    pub advice: bool,
    /// The most advice may delay a submission, counted from `pre_submit`.
    pub advice_timeout: Duration,
    /// The `munge` client that makes the submitting user's credential.
    pub munge: PathBuf,
    /// munged's socket; `None`: the client's default.
    pub munge_socket: Option<PathBuf>,
}

impl Default for PluginConfig {
    fn default() -> Self {
        Self {
            public_url: String::new(),
            ingest_url: String::new(),
            cluster: None,
            secret_file: None,
            spool_dir: PathBuf::from("/var/spool/slurmlens"),
            spool_max_bytes: 64 * 1024 * 1024,
            timeout: Duration::from_millis(500),
            connect_timeout: Duration::from_millis(200),
            cgroup_path: None,
            dcgm_job_map_dir: None,
            nvidia_smi: None,
            link_in_output: true,
            advice: true,
            advice_timeout: Duration::from_millis(300),
            munge: PathBuf::from("munge"),
            munge_socket: None,
        }
    }
}

/// Why a configuration file could not be used.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The file to read: `SLURMLENS_PLUGIN_CONF`, else `slurmlens-plugin.conf` next to `slurm.conf`
/// (`$SLURM_CONF`, else `/etc/slurm/slurm.conf`).
pub fn default_path(get_env: impl Fn(&str) -> Option<String>) -> PathBuf {
    if let Some(path) = get_env("SLURMLENS_PLUGIN_CONF").filter(|path| !path.is_empty()) {
        return PathBuf::from(path);
    }
    let slurm_conf = get_env("SLURM_CONF").filter(|path| !path.is_empty()).unwrap_or("/etc/slurm/slurm.conf".into());
    Path::new(&slurm_conf).parent().unwrap_or(Path::new("/etc/slurm")).join(FILE_NAME)
}

/// Where `slurm.conf` is: `SLURM_CONF`, else `/etc/slurm/slurm.conf`.
pub fn slurm_conf_path(get_env: impl Fn(&str) -> Option<String>) -> PathBuf {
    PathBuf::from(get_env("SLURM_CONF").filter(|path| !path.is_empty()).unwrap_or("/etc/slurm/slurm.conf".into()))
}

/// `ClusterName` of a `slurm.conf` text (keys are case-insensitive; `#` starts a comment).
pub fn cluster_name(slurm_conf: &str) -> Option<String> {
    slurm_conf.lines().find_map(|line| {
        let line = line.split('#').next()?.trim();
        let (key, value) = line.split_once('=')?;
        key.trim().eq_ignore_ascii_case("ClusterName").then(|| value.trim().to_string()).filter(|v| !v.is_empty())
    })
}

impl PluginConfig {
    /// Reads and parses `path`. Unknown keys are returned as warnings, not errors: an older plugin keeps
    /// working with a newer file.
    pub fn load(path: &Path) -> Result<(Self, Vec<String>), ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|e| ConfigError(format!("reading {}: {e}", path.display())))?;
        Self::parse(&text).map_err(|ConfigError(message)| ConfigError(format!("{}: {message}", path.display())))
    }

    /// Parses the text of a configuration file.
    pub fn parse(text: &str) -> Result<(Self, Vec<String>), ConfigError> {
        let mut config = Self::default();
        let mut warnings = Vec::new();
        let mut ingest_url = None;
        for (number, raw_line) in text.lines().enumerate() {
            let line_no = number + 1;
            let line = strip_comment(raw_line).trim();
            if line.is_empty() {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                return Err(ConfigError(format!("line {line_no}: expected `key = value`")));
            };
            let key = key.trim();
            let value = unquote(value.trim()).map_err(|e| ConfigError(format!("line {line_no}: {e}")))?;
            let bad = |what: &str| ConfigError(format!("line {line_no}: `{key}` {what}"));
            match key {
                "public_url" => config.public_url = value.trim_end_matches('/').to_string(),
                "ingest_url" => ingest_url = Some(value.trim_end_matches('/').to_string()),
                "cluster" => config.cluster = Some(value).filter(|name| !name.is_empty()),
                "secret_file" => config.secret_file = Some(PathBuf::from(value)).filter(|p| !p.as_os_str().is_empty()),
                "spool_dir" => config.spool_dir = PathBuf::from(value),
                "spool_max_bytes" => config.spool_max_bytes = value.parse().map_err(|_| bad("must be a number"))?,
                "timeout_ms" => config.timeout = millis(&value).ok_or_else(|| bad("must be 1..=10000"))?,
                "connect_timeout_ms" => {
                    config.connect_timeout = millis(&value).ok_or_else(|| bad("must be 1..=10000"))?;
                }
                "cgroup_path" => config.cgroup_path = Some(value).filter(|template| !template.is_empty()),
                "dcgm_job_map_dir" => {
                    config.dcgm_job_map_dir = Some(PathBuf::from(value)).filter(|p| !p.as_os_str().is_empty());
                }
                "nvidia_smi" => config.nvidia_smi = Some(PathBuf::from(value)),
                "link_in_output" => {
                    config.link_in_output = match value.as_str() {
                        "true" => true,
                        "false" => false,
                        _ => return Err(bad("must be true or false")),
                    };
                }
                "advice" => {
                    config.advice = match value.as_str() {
                        "on" | "true" => true,
                        "off" | "false" => false,
                        _ => return Err(bad("must be on or off")),
                    };
                }
                "advice_timeout_ms" => {
                    config.advice_timeout = millis(&value).ok_or_else(|| bad("must be 1..=10000"))?;
                }
                "munge" => config.munge = PathBuf::from(value),
                "munge_socket" => {
                    config.munge_socket = Some(PathBuf::from(value)).filter(|p| !p.as_os_str().is_empty())
                }
                other => warnings.push(format!("line {line_no}: unknown key `{other}` ignored")),
            }
        }
        config.ingest_url = ingest_url.unwrap_or_else(|| config.public_url.clone());
        if config.spool_dir.as_os_str().is_empty() || config.spool_dir.is_relative() {
            return Err(ConfigError("`spool_dir` must be an absolute path".into()));
        }
        Ok((config, warnings))
    }

    /// The page of one job, as users see it: `<public_url>/jobs/<id>?cluster=<name>` (a server may serve
    /// several clusters, whose job ids overlap); without a cluster name, `<public_url>/jobs/<id>`. `None`
    /// without a `public_url`.
    pub fn job_link(&self, job: &str, cluster: Option<&str>) -> Option<String> {
        let base = (!self.public_url.is_empty()).then(|| format!("{}/jobs/{job}", self.public_url))?;
        Some(match cluster.filter(|name| name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')) {
            Some(name) if !name.is_empty() => format!("{base}?cluster={name}"),
            _ => base,
        })
    }

    /// The cluster the links name: `cluster` of this file, else `ClusterName` of `slurm_conf`.
    pub fn link_cluster(&self, slurm_conf: &Path) -> Option<String> {
        self.cluster.clone().or_else(|| cluster_name(&std::fs::read_to_string(slurm_conf).ok()?))
    }
}

fn millis(value: &str) -> Option<Duration> {
    value.parse::<u64>().ok().filter(|ms| (1..=10_000).contains(ms)).map(Duration::from_millis)
}

/// Drops a `#` comment that is not inside double quotes.
fn strip_comment(line: &str) -> &str {
    let mut in_quotes = false;
    let mut escaped = false;
    for (at, c) in line.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_quotes => escaped = true,
            '"' => in_quotes = !in_quotes,
            '#' if !in_quotes => return &line[..at],
            _ => {}
        }
    }
    line
}

/// `"text"` with `\"` and `\\` escapes, or a bare word (numbers, `true`).
fn unquote(value: &str) -> Result<String, String> {
    let Some(inner) = value.strip_prefix('"') else {
        return Ok(value.to_string());
    };
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '"' => {
                return if chars.as_str().trim().is_empty() {
                    Ok(out)
                } else {
                    Err("text after the closing quote".into())
                };
            }
            '\\' => match chars.next() {
                Some(escaped @ ('"' | '\\')) => out.push(escaped),
                _ => return Err("only \\\" and \\\\ escapes are allowed".into()),
            },
            other => out.push(other),
        }
    }
    Err("unterminated string".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_quoted_and_bare_values_with_comments() {
        let text = "# comment\npublic_url = \"http://h:8080/\" # trailing\ncluster = lab\ntimeout_ms = 300\n\
                    spool_dir = \"/var/spool/x#y\"\nlink_in_output = false\nfuture_key = 1\n";
        let (config, warnings) = PluginConfig::parse(text).expect("valid config");
        assert_eq!(config.public_url, "http://h:8080");
        assert_eq!(config.ingest_url, "http://h:8080");
        assert_eq!(config.cluster.as_deref(), Some("lab"));
        assert_eq!(config.timeout, Duration::from_millis(300));
        assert_eq!(config.spool_dir, PathBuf::from("/var/spool/x#y"));
        assert!(!config.link_in_output);
        assert!(config.advice, "advice is on unless the site turns it off");
        let (off, _) =
            PluginConfig::parse("advice = off\nadvice_timeout_ms = 150\nmunge_socket = /run/m.sock\n").expect("valid");
        assert!(!off.advice);
        assert_eq!(off.advice_timeout, Duration::from_millis(150));
        assert_eq!(off.munge_socket, Some(PathBuf::from("/run/m.sock")));
        assert_eq!(warnings, ["line 7: unknown key `future_key` ignored"]);
        assert_eq!(config.job_link("42", None).as_deref(), Some("http://h:8080/jobs/42"));
        assert_eq!(config.job_link("42", Some("lab")).as_deref(), Some("http://h:8080/jobs/42?cluster=lab"));
        assert_eq!(
            config.job_link("42", Some("a b&c")).as_deref(),
            Some("http://h:8080/jobs/42"),
            "never a broken URL"
        );
        assert_eq!(cluster_name("# x\nSlurmctldHost=h\nclustername = sakura # ours\n").as_deref(), Some("sakura"));
        assert_eq!(cluster_name("SlurmctldHost=h\n"), None);
    }

    #[test]
    fn refuses_broken_lines_and_values() {
        assert!(PluginConfig::parse("public_url\n").is_err());
        assert!(PluginConfig::parse("public_url = \"open\n").is_err());
        assert!(PluginConfig::parse("timeout_ms = 0\n").is_err());
        assert!(PluginConfig::parse("timeout_ms = soon\n").is_err());
        assert!(PluginConfig::parse("spool_dir = relative\n").is_err());
        assert!(PluginConfig::parse("link_in_output = yes\n").is_err());
        assert!(PluginConfig::parse("advice = maybe\n").is_err());
        assert!(PluginConfig::parse("advice_timeout_ms = 0\n").is_err());
    }

    #[test]
    fn default_path_sits_next_to_slurm_conf() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| vars.iter().find(|(key, _)| *key == name).map(|(_, value)| value.to_string())
        };
        assert_eq!(default_path(env(&[])), PathBuf::from("/etc/slurm/slurmlens-plugin.conf"));
        assert_eq!(
            default_path(env(&[("SLURM_CONF", "/lab/etc/slurm.conf")])),
            PathBuf::from("/lab/etc/slurmlens-plugin.conf")
        );
        assert_eq!(default_path(env(&[("SLURMLENS_PLUGIN_CONF", "/x.conf")])), PathBuf::from("/x.conf"));
    }
}
