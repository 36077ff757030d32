//! `spank_slurmlens.so`: the SPANK plugin that, on every node of a job,
//! - in the job prolog (`slurm_spank_job_prolog`, job_script context, as root, once per node per job)
//!   sends the job's GPUs on the node to slurmlens (or spools them), and writes dcgm-exporter's mapping;
//! - in the job epilog (`slurm_spank_job_epilog`) tells slurmlens the job ended there;
//! - in the batch step's first task (`slurm_spank_task_init`, remote context) prints the report link as
//!   the first line of the job's output.
//!
//! plugstack.conf: `optional /path/spank_slurmlens.so conf=/etc/slurm/slurmlens-plugin.conf`.
//! Every hook returns 0: a monitoring failure never fails or holds a job.
#![allow(unsafe_code, reason = "a Slurm plugin is an FFI boundary: exported symbols, spank_* calls, Slurm's logger")]

use std::ffi::{CStr, CString, c_char, c_int};
use std::io::Write;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;

use slurmlens_plugin_core::{Log, SLURM_BATCH_SCRIPT, SLURM_VERSION_NUMBER, config, link_line, load_config};
use slurmlens_plugin_core::{on_job_event, spank_context, spank_item};
use slurmlens_wire::GpuAllocationEvent;

#[unsafe(no_mangle)]
pub static plugin_name: [u8; 10] = *b"slurmlens\0";

#[unsafe(no_mangle)]
pub static plugin_type: [u8; 6] = *b"spank\0";

#[unsafe(no_mangle)]
pub static plugin_version: u32 = SLURM_VERSION_NUMBER;

/// The plugin's own interface version (`SPANK_PLUGIN(name, 1)`).
#[unsafe(no_mangle)]
pub static spank_plugin_version: u32 = 1;

/// `struct spank_handle`, opaque.
#[repr(C)]
pub struct SpankHandle {
    _private: [u8; 0],
}

type Spank = *mut SpankHandle;

unsafe extern "C" {
    fn spank_context() -> c_int;
    fn spank_get_item(spank: Spank, item: c_int, ...) -> c_int;
    fn slurm_info(format: *const c_char, ...);
    fn slurm_error(format: *const c_char, ...);
}

const ESPANK_SUCCESS: c_int = 0;

/// Slurm's logger: the prolog's and epilog's lines land in slurmd's log.
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

/// The logger inside a job's task: Slurm copies errors there into the job's stderr, and a site's
/// configuration mistake does not belong in users' output (the prolog logs it to slurmd's log already).
struct TaskLog;

impl Log for TaskLog {
    fn info(&self, message: &str) {
        SlurmLog.info(message);
    }

    fn error(&self, message: &str) {
        SlurmLog.info(message);
    }
}

/// `conf=PATH` from the plugstack.conf line, else the default next to slurm.conf.
fn config_path(argc: c_int, argv: *mut *mut c_char, log: &dyn Log) -> PathBuf {
    let count = usize::try_from(argc).unwrap_or(0);
    if !argv.is_null() {
        for at in 0..count {
            // SAFETY: Slurm passes `argc` valid NUL-terminated strings in `argv`.
            let argument = unsafe { *argv.add(at) };
            if argument.is_null() {
                continue;
            }
            // SAFETY: non-null, NUL-terminated (as above), and only read during this call.
            let text = unsafe { CStr::from_ptr(argument) }.to_string_lossy();
            if let Some(path) = text.strip_prefix("conf=") {
                return PathBuf::from(path);
            }
            log.error(&format!("slurmlens: unknown plugstack.conf argument `{text}` ignored"));
        }
    }
    config::default_path(|name| std::env::var(name).ok())
}

/// A `uint32_t` item of the handle, or `None` where this context does not offer it.
fn item_u32(spank: Spank, item: c_int) -> Option<u32> {
    let mut value: u32 = 0;
    // SAFETY: these items take one `uint32_t *` (spank.h); `value` outlives the call.
    let rc = unsafe { spank_get_item(spank, item, &mut value as *mut u32) };
    (rc == ESPANK_SUCCESS).then_some(value)
}

/// Runs a hook body, swallowing panics: unwinding into Slurm would be undefined behaviour.
fn guarded(body: impl FnOnce()) -> c_int {
    if catch_unwind(AssertUnwindSafe(body)).is_err() {
        SlurmLog.error("slurmlens: internal error in the plugin (ignored, the job continues)");
    }
    0
}

fn job_script_event(event: GpuAllocationEvent, argc: c_int, argv: *mut *mut c_char) -> c_int {
    guarded(|| {
        // SAFETY: no arguments; answers which Slurm process loaded the plugin.
        if unsafe { spank_context() } != spank_context::S_CTX_JOB_SCRIPT {
            return;
        }
        let path = config_path(argc, argv, &SlurmLog);
        // In the job_script context the job's variables are the process environment.
        on_job_event(event, &path, |name| std::env::var(name).ok(), &SlurmLog);
    })
}

/// `slurm_spank_job_prolog`: runs in slurmd's prolog on each node, before the job's first step there.
#[unsafe(no_mangle)]
pub extern "C" fn slurm_spank_job_prolog(_spank: Spank, argc: c_int, argv: *mut *mut c_char) -> c_int {
    job_script_event(GpuAllocationEvent::Start, argc, argv)
}

/// `slurm_spank_job_epilog`: runs in slurmd's epilog on each node when the job ends there.
#[unsafe(no_mangle)]
pub extern "C" fn slurm_spank_job_epilog(_spank: Spank, argc: c_int, argv: *mut *mut c_char) -> c_int {
    job_script_event(GpuAllocationEvent::End, argc, argv)
}

/// `slurm_spank_task_init`: runs in each task, as the user, just before the task's program starts, with
/// the task's stdout already open. Only the batch script's task prints, so the line appears once per job.
#[unsafe(no_mangle)]
pub extern "C" fn slurm_spank_task_init(spank: Spank, argc: c_int, argv: *mut *mut c_char) -> c_int {
    guarded(|| {
        // SAFETY: no arguments.
        if unsafe { spank_context() } != spank_context::S_CTX_REMOTE {
            return;
        }
        if item_u32(spank, spank_item::S_JOB_STEPID) != Some(SLURM_BATCH_SCRIPT)
            || item_u32(spank, spank_item::S_TASK_GLOBAL_ID) != Some(0)
        {
            return;
        }
        let Some(job_id) = item_u32(spank, spank_item::S_JOB_ID) else { return };
        let job = match (item_u32(spank, spank_item::S_JOB_ARRAY_ID), item_u32(spank, spank_item::S_JOB_ARRAY_TASK_ID))
        {
            (Some(array_id), Some(task_id)) if array_id != 0 => format!("{array_id}_{task_id}"),
            _ => job_id.to_string(),
        };
        let path = config_path(argc, argv, &TaskLog);
        let Some(config) = load_config(&path, &TaskLog) else { return };
        if !config.link_in_output {
            return;
        }
        let cluster = config.link_cluster(&config::slurm_conf_path(|name| std::env::var(name).ok()));
        if let Some(line) = link_line(&config, &job, cluster.as_deref()) {
            let mut stdout = std::io::stdout().lock();
            // The task execs right after this hook: flush, or the line is lost with the buffer.
            let _ = writeln!(stdout, "{line}").and_then(|()| stdout.flush());
        }
    })
}
