//! `cli_filter/slurmlens`: Slurm's cli_filter plugin that prints `slurmlens: report at <url>/jobs/<id>` on
//! the user's terminal when sbatch, salloc or srun has submitted a job (`post_submit` is the one client
//! hook that learns the new job id). Configured with `CliFilterPlugins=slurmlens` in slurm.conf.
#![allow(unsafe_code, reason = "a Slurm plugin is an FFI boundary: exported symbols and calls into Slurm's logger")]

use std::ffi::{CString, c_char, c_int, c_void};
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};

use slurmlens_plugin_core::{Log, SLURM_VERSION_NUMBER, config, link_line, load_config};

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
    fn slurm_error(format: *const c_char, ...);
}

/// Slurm's logger of the client (sbatch prints errors on the terminal, info with `-v`).
struct SlurmLog;

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

/// `int cli_filter_p_pre_submit(slurm_opt_t *opt, int offset)`: nothing to check.
#[unsafe(no_mangle)]
pub extern "C" fn cli_filter_p_pre_submit(_options: *mut c_void, _offset: c_int) -> c_int {
    SLURM_SUCCESS
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
    }));
}
