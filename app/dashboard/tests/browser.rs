//! The dashboard in a real browser: headless Chromium loads the pages of the
//! demo's story, the DOM it builds is checked, and each page is saved as a
//! screenshot under `$CARGO_TARGET_TMPDIR/dashboard-screenshots/`.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use common::Story;
use mcjs::state::FailureCause;
use mcjs_client::history::failure_cause;

const CHROMIUM: &str = "chromium";

fn chromium_or_fail() {
    let found = std::process::Command::new(CHROMIUM)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found,
        "the browser test needs Debian's `chromium` on PATH: run `bash scripts/setup.sh` \
         (or `apt-get install -y chromium`)"
    );
}

/// Runs headless Chromium; returns its stdout, and fails on any error the
/// page logged to its console (Chromium writes every console message to
/// stderr as `CONSOLE`; the dashboard's script logs nothing).
async fn chromium(args: &[&str]) -> String {
    let output = tokio::time::timeout(
        Duration::from_secs(90),
        tokio::process::Command::new(CHROMIUM)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                "--enable-logging=stderr",
                "--v=0",
            ])
            .args(args)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("chromium finishes within 90 s")
    .expect("chromium runs");
    assert!(
        output.status.success(),
        "chromium {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    let console_errors: Vec<&str> = stderr.lines().filter(|l| l.contains(":CONSOLE")).collect();
    assert!(
        console_errors.is_empty(),
        "{args:?}: the page logged to its console: {console_errors:#?}"
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

async fn dom(url: &str) -> String {
    chromium(&["--dump-dom", url]).await
}

async fn screenshot(url: &str, file: &Path) {
    let _ = std::fs::remove_file(file);
    let arg = format!("--screenshot={}", file.display());
    chromium(&["--window-size=1280,1800", &arg, url]).await;
    let png = std::fs::read(file).unwrap_or_else(|e| panic!("no screenshot of {url}: {e}"));
    assert!(
        png.starts_with(b"\x89PNG") && png.len() > 10_000,
        "{url}: an empty screenshot"
    );
}

fn screenshots_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread")]
async fn the_pages_render_in_a_real_browser() {
    chromium_or_fail();
    let story = Story::build().await;

    let overview = dom(&story.url("/")).await;
    assert!(overview.contains(r#"id="jobs-total">3<"#), "{overview}");
    assert!(
        overview.contains(r#"data-state="completed">1<"#),
        "{overview}"
    );
    assert!(overview.contains("<svg"), "the chart is drawn: {overview}");
    assert!(
        overview.contains(&story.recovered.to_string()),
        "jobs are linked"
    );

    let job_url = story.url(&format!("/job/{}", story.recovered));
    let job = dom(&job_url).await;
    assert!(job.contains(r#"id="audit-badge">verified<"#), "{job}");
    assert!(job.contains(&hex::encode(story.output_hash)), "{job}");
    assert_eq!(job.matches("<tr class=\"verified\"").count(), 3, "{job}");
    assert!(job.contains(failure_cause(FailureCause::NodeLost)), "{job}");

    let dir = screenshots_dir();
    for (name, path) in [
        ("overview", "/".to_string()),
        ("job", format!("/job/{}", story.recovered)),
        ("job-failed", format!("/job/{}", story.failed)),
        ("provider", format!("/provider/{}", story.provider)),
        ("node", format!("/node/{}", story.nodes[1])),
        ("program", "/program".to_string()),
    ] {
        screenshot(&story.url(&path), &dir.join(format!("{name}.png"))).await;
    }

    // After tampering, the browser shows where the record stops verifying.
    let job_account = story.client.job(&story.recovered).await.unwrap().unwrap();
    let mut data = story
        .client
        .account(&story.recovered)
        .await
        .unwrap()
        .unwrap()
        .data;
    let at = data
        .windows(32)
        .position(|w| w == job_account.checkpoint_chain)
        .unwrap();
    data[at] ^= 0xff;
    story
        .client
        .surfnet_set_account_data(&story.recovered, &data)
        .await
        .unwrap();
    let job = dom(&job_url).await;
    assert!(job.contains(r#"id="audit-badge">not verified<"#), "{job}");
    screenshot(&job_url, &dir.join("job-tampered.png")).await;
    eprintln!("screenshots in {}", dir.display());
    story.localnet.stop();
}
