//! `slurmlens report JOBID --format html`: the job page as one self-contained file, for a ticket.

use slurmlens::config::{AnonymousAccess, VictoriaMetricsConfig};
use slurmlens::terminal::{Format, ReportArgs};
use slurmlens_wire::JobReport;

use crate::support::{lab, sakura_gpu_job, spawn_app, test_config};

fn args(job_id: &str, output: &std::path::Path) -> ReportArgs {
    ReportArgs {
        job_id: job_id.into(),
        cluster: Some("sakura".into()),
        json: false,
        format: Format::Html,
        output: Some(output.to_path_buf()),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_page_prints_to_one_file_with_its_charts_inline_and_no_scripts() {
    let mut config = test_config(AnonymousAccess::Nobody);
    config.victoriametrics = Some(VictoriaMetricsConfig {
        url: lab().var("SLURMLENS_VM_URL").to_string(),
        timeout_ms: 10_000,
        readings_max_age_s: 1800,
        bearer_token: None,
    });
    config.public_url = "https://lens.example.org".into();
    let job_id = sakura_gpu_job().await.to_string();
    let folder = std::env::temp_dir().join(format!("slurmlens-printable-{}", std::process::id()));
    std::fs::create_dir_all(&folder).expect("a temporary folder");
    let output = folder.join("job.html");
    slurmlens::terminal::run(&config, &args(&job_id, &output)).await.expect("the report prints");
    let file = std::fs::read_to_string(&output).expect("the file was written");

    // Self-contained: no script, no stylesheet to fetch, charts drawn in the file.
    assert!(!file.contains("<script"), "no script: {:.600}", &file[file.find("<script").unwrap_or(0)..]);
    assert!(!file.contains("href=\"/web/style.css\"") && file.contains("<style>"), "the stylesheet inline");
    assert!(file.matches("<svg").count() >= 2, "the report's charts are in the file");
    assert!(file.contains("data-testid=\"printed-note\""), "it says where it came from");
    let live = format!("https://lens.example.org/jobs/{job_id}?cluster=sakura");
    assert!(file.contains(&format!("<a href=\"{live}\">")), "the note links the live page");
    assert!(file.contains("<base href=\"https://lens.example.org/\""), "the page's links resolve on the site");

    // The same job and report staff read from the API.
    let app = spawn_app(config.clone()).await;
    let response = app.get_as("root", &format!("/api/v1/jobs/{job_id}/report?cluster=sakura")).await;
    assert_eq!(response.status(), 200);
    let report: JobReport = response.json().await.expect("report JSON");
    assert!(file.contains(&format!("Job {job_id}")), "the job's title");
    assert!(file.contains(&report.job.node_list), "its nodes: {}", report.job.node_list);
    let gpu_hours = slurmlens_web::pages::report::gpu_hours(report.totals.gpu_hours, report.totals.gpu_hours);
    assert!(file.contains(&format!("{gpu_hours} GPU hours")), "its GPU hours ({gpu_hours})");

    // A job that is not there: an error, and no file.
    let missing = folder.join("missing.html");
    let error = slurmlens::terminal::run(&config, &args("999999999", &missing)).await.expect_err("no such job");
    assert!(error.to_string().contains("no job 999999999 on cluster sakura"), "{error:#}");
    assert!(!missing.exists());
    std::fs::remove_dir_all(&folder).expect("removing the temporary folder");
}
