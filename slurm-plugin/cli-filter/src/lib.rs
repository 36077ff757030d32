//! `cli_filter/slurmlens`: Slurm's cli_filter plugin that prints `slurmlens: report at <url>/jobs/<id>` on
//! the user's terminal when sbatch, salloc or srun has submitted a job (`post_submit` is the one client
//! hook that learns the new job id). Configured with `CliFilterPlugins=slurmlens` in slurm.conf.
//!
//! Beside the link, one line of advice from the user's own history (`slurmlens: advice: …`): asked
//! for in `pre_submit` on a thread of its own, printed in `post_submit` only if it arrived within the
//! budget (`advice_timeout_ms`, counted from `pre_submit`). Submission is never delayed past the budget
//! and never fails because of it.
#![allow(unsafe_code, reason = "a Slurm plugin is an FFI boundary: exported symbols and calls into Slurm's logger")]

use std::ffi::{CString, c_char, c_int, c_void};
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;

use slurmlens_plugin_core::advice::{self, JobOptions, Pending};
use slurmlens_plugin_core::{Log, SLURM_VERSION_NUMBER, config, link_line, load_config};

/// The advice asked for by `pre_submit`, awaited by `post_submit` (one submission per process).
static PENDING: Mutex<Option<Pending>> = Mutex::new(None);

/// Slurm's plugin loader reads these three symbols; `plugin_version` must equal the loading Slurm's.
#[unsafe(no_mangle)]
pub static plugin_name: [u8; 28] = *b"slurmlens report link (cli)\0";

#[unsafe(no_mangle)]
pub static plugin_type: [u8; 21] = *b"cli_filter/slurmlens\0";

#[unsafe(no_mangle)]
pub static plugin_version: u32 = SLURM_VERSION_NUMBER;

const SLURM_SUCCESS: c_int = 0;

unsafe extern "C" {
    fn slurm_info(format: *const c_char, ...);
    fn slurm_verbose(format: *const c_char, ...);
    fn slurm_error(format: *const c_char, ...);
    /// libslurm's `char *slurm_option_get(slurm_opt_t *opt, const char *name)`: a copy of the option's
    /// value as text, or NULL.
    fn slurm_option_get(options: *mut c_void, name: *const c_char) -> *mut c_char;
    /// libslurm's `bool slurm_option_isset(slurm_opt_t *opt, const char *name)`.
    fn slurm_option_isset(options: *mut c_void, name: *const c_char) -> bool;
}

/// One option of the job being submitted, as text; `only_if_set`: `None` unless the user gave it
/// (Slurm's getters print defaults such as `unset` otherwise).
fn option(options: *mut c_void, name: &std::ffi::CStr, only_if_set: bool) -> Option<String> {
    // SAFETY: `options` is the `slurm_opt_t *` Slurm passed to this hook, valid during it; `name` is
    // NUL-terminated. The copy Slurm returns is left to the process: sbatch, salloc and srun are
    // short-lived, and freeing it needs `xfree`, whose signature differs between Slurm releases.
    unsafe {
        if only_if_set && !slurm_option_isset(options, name.as_ptr()) {
            return None;
        }
        let value = slurm_option_get(options, name.as_ptr());
        if value.is_null() {
            return None;
        }
        let text = std::ffi::CStr::from_ptr(value).to_string_lossy().trim().to_string();
        (!text.is_empty()).then_some(text)
    }
}

/// Slurm's logger of the client (sbatch prints errors on the terminal, info with `-v`).
struct SlurmLog;

impl SlurmLog {
    /// A line shown only with `-v`: why there is no advice, which is no news to the user otherwise.
    fn verbose(&self, message: &str) {
        let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
        // SAFETY: a constant "%s" format with one NUL-terminated string argument.
        unsafe { slurm_verbose(c"%s".as_ptr(), message.as_ptr()) }
    }
}

impl Log for SlurmLog {
    fn info(&self, message: &str) {
        let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
        // SAFETY: a constant "%s" format with one NUL-terminated string argument.
        unsafe { slurm_info(c"%s".as_ptr(), message.as_ptr()) }
    }

    fn error(&self, message: &str) {
        let message = CString::new(message.replace('\0', " ")).unwrap_or_default();
        // SAFETY: as above.
        unsafe { slurm_error(c"%s".as_ptr(), message.as_ptr()) }
    }
}

#[unsafe(no_mangle)]
pub extern "C" fn init() -> c_int {
    SLURM_SUCCESS
}

#[unsafe(no_mangle)]
pub extern "C" fn fini() -> c_int {
    SLURM_SUCCESS
}

/// `int cli_filter_p_setup_defaults(slurm_opt_t *opt, bool early)`: nothing to change.
#[unsafe(no_mangle)]
pub extern "C" fn cli_filter_p_setup_defaults(_options: *mut c_void, _early: bool) -> c_int {
    SLURM_SUCCESS
}

/// `int cli_filter_p_pre_submit(slurm_opt_t *opt, int offset)`: starts asking for advice (the first
/// component only, outside an allocation, where the site and the user want it). Always succeeds.
#[unsafe(no_mangle)]
pub extern "C" fn cli_filter_p_pre_submit(options: *mut c_void, offset: c_int) -> c_int {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if offset != 0 || options.is_null() || std::env::var_os("SLURM_JOB_ID").is_some() {
            return;
        }
        let get_env = |name: &str| std::env::var(name).ok();
        let path = config::default_path(get_env);
        let Some(config) = load_config(&path, &SilentLog) else { return };
        if !advice::wanted(&config, get_env) {
            return;
        }
        let job = JobOptions {
            job_name: option(options, c"job-name", false),
            cluster: config.link_cluster(&config::slurm_conf_path(get_env)),
            gpus: option(options, c"gpus", true),
            gpus_per_node: option(options, c"gpus-per-node", true),
            gres: option(options, c"gres", true),
            nodes: option(options, c"nodes", true),
            time_limit: option(options, c"time", true),
            partition: option(options, c"partition", true),
            uid: option(options, c"uid", true),
        };
        if let Some(pending) = advice::start(&config, &job)
            && let Ok(mut slot) = PENDING.lock()
        {
            *slot = Some(pending);
        }
    }));
    SLURM_SUCCESS
}

/// `pre_submit` reads the configuration again: `post_submit` reports its problems, once.
struct SilentLog;

impl Log for SilentLog {
    fn info(&self, _message: &str) {}
    fn error(&self, _message: &str) {}
}

/// `void cli_filter_p_post_submit(int offset, uint32_t jobid, uint32_t stepid)`: prints the link once
/// per submission (het components share it: offset 0 only). An srun inside an existing allocation
/// creates a step, not a job: nothing is printed there.
#[unsafe(no_mangle)]
pub extern "C" fn cli_filter_p_post_submit(offset: c_int, job_id: u32, step_id: u32) {
    let _ = catch_unwind(AssertUnwindSafe(|| {
        if offset != 0 || job_id == 0 {
            return;
        }
        let inside_allocation = std::env::var_os("SLURM_JOB_ID").is_some();
        if inside_allocation && step_id != slurmlens_plugin_core::NO_VAL {
            return;
        }
        let path = config::default_path(|name| std::env::var(name).ok());
        let Some(config) = load_config(&path, &SlurmLog) else { return };
        let cluster = config.link_cluster(&config::slurm_conf_path(|name| std::env::var(name).ok()));
        if let Some(line) = link_line(&config, &job_id.to_string(), cluster.as_deref()) {
            let _ = writeln!(std::io::stderr(), "{line}");
        }
        let pending = PENDING.lock().ok().and_then(|mut slot| slot.take());
        match pending.map(Pending::line) {
            Some(Ok(Some(line))) => {
                let _ = writeln!(std::io::stderr(), "{line}");
            }
            // Shown with `sbatch -v`: why there is no advice, never in the user's way.
            Some(Err(reason)) => SlurmLog.verbose(&format!("slurmlens: no advice: {reason}")),
            Some(Ok(None)) => SlurmLog.verbose("slurmlens: no advice for this job"),
            None => SlurmLog.verbose("slurmlens: advice not asked for"),
        }
    }));
}
