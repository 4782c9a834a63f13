//! The dashboard in a real browser: Debian's headless Chromium, driven over
//! WebDriver by chromedriver, opens every kind of page of the demo's story;
//! the DOM is checked against what the chain client reads, any error the
//! browser logs fails the test, and each page is saved as a screenshot under
//! `$CARGO_TARGET_DIR/tmp/dashboard-screenshots/`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::Story;
use fantoccini::{Client, ClientBuilder, Locator};
use mcjs::state::FailureCause;
use mcjs_client::history::{failure_cause, usdc};
use serde_json::{Value, json};

const CHROMIUM: &str = "chromium";
const CHROMEDRIVER: &str = "chromedriver";
const INSTALL: &str =
    "run `bash scripts/setup.sh` (or `apt-get install -y chromium chromium-driver`)";

/// The absolute path of `program` on PATH, or a failure saying how to
/// install it.
fn installed(program: &str) -> PathBuf {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join(program))
            .find(|path| path.is_file())
    });
    let path = found.unwrap_or_else(|| {
        panic!("the browser test needs Debian's `{program}` on PATH: {INSTALL}")
    });
    let runs = Command::new(&path)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(runs, "`{} --version` fails: {INSTALL}", path.display());
    path
}

/// chromedriver on a free loopback port, killed when dropped (also when the
/// test fails part-way).
struct Chromedriver {
    child: Child,
    url: String,
}

impl Chromedriver {
    async fn start() -> Chromedriver {
        let program = installed(CHROMEDRIVER);
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(program)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let driver = Chromedriver {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        let http = reqwest::Client::new();
        for _ in 0..200 {
            let status = http.get(format!("{}/status", driver.url)).send().await;
            if let Ok(response) = status
                && let Ok(body) = response.json::<Value>().await
                && body["value"]["ready"] == true
            {
                return driver;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("chromedriver did not answer on {} within 10 s", driver.url);
    }
}

impl Drop for Chromedriver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A headless Chromium session.
struct Browser {
    client: Client,
    /// `…/session/ID/se/log`: the browser's console and network log.
    log_url: String,
    http: reqwest::Client,
    screenshots: PathBuf,
}

impl Browser {
    async fn open(driver: &Chromedriver, screenshots: PathBuf) -> Browser {
        let chromium = installed(CHROMIUM);
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--hide-scrollbars",
                    "--window-size=1280,1800",
                ],
            },
            // Every console message and failed load, read back after each page.
            "goog:loggingPrefs": { "browser": "ALL" },
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!()
        };
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(capabilities)
            .connect(&driver.url)
            .await
            .unwrap_or_else(|e| panic!("chromedriver opens a Chromium session: {e}"));
        let session = client
            .session_id()
            .await
            .unwrap()
            .expect("a WebDriver session id");
        Browser {
            client,
            log_url: format!("{}/session/{session}/se/log", driver.url),
            http: reqwest::Client::new(),
            screenshots,
        }
    }

    /// Loads `url` and fails on anything the browser logged at error level
    /// (console.error, an uncaught exception, a failed load).
    async fn goto(&self, url: &str) {
        self.client
            .goto(url)
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        let state = self
            .client
            .execute("return document.readyState", vec![])
            .await
            .unwrap();
        assert_eq!(state, "complete", "{url}");
        self.no_console_errors(url).await;
    }

    async fn no_console_errors(&self, url: &str) {
        let log: Value = self
            .http
            .post(&self.log_url)
            .json(&json!({ "type": "browser" }))
            .send()
            .await
            .expect("chromedriver answers")
            .json()
            .await
            .expect("the browser log is JSON");
        let entries = log["value"]
            .as_array()
            .unwrap_or_else(|| panic!("no browser log from chromedriver: {log}"));
        let errors: Vec<&Value> = entries.iter().filter(|e| e["level"] == "SEVERE").collect();
        assert!(
            errors.is_empty(),
            "{url}: the browser logged errors: {errors:#?}"
        );
    }

    async fn text(&self, css: &str) -> String {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("no `{css}` on the page: {e}"))
            .text()
            .await
            .unwrap()
            .trim()
            .to_string()
    }

    async fn count(&self, css: &str) -> usize {
        self.client.find_all(Locator::Css(css)).await.unwrap().len()
    }

    async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.unwrap();
        assert!(
            png.starts_with(b"\x89PNG") && png.len() > 10_000,
            "{name}: an empty screenshot"
        );
        let file = self.screenshots.join(format!("{name}.png"));
        std::fs::write(&file, png).unwrap();
    }
}

fn screenshots_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread")]
async fn the_pages_render_in_a_real_browser() {
    installed(CHROMIUM);
    let driver = Chromedriver::start().await;
    let story = Story::build().await;
    let client = &story.client;
    let (_, config) = client.config().await.unwrap();
    let browser = Browser::open(&driver, screenshots_dir()).await;

    // Overview: the tiles equal what the chain client reads.
    browser.goto(&story.url("/")).await;
    assert_eq!(browser.text("#jobs-total").await, "3");
    assert_eq!(browser.text("#queue-length").await, "0");
    assert_eq!(browser.text("#providers-total").await, "1");
    assert_eq!(browser.text("#nodes-total").await, "2");
    let treasury = client.token_balance(&config.treasury).await.unwrap();
    assert!(treasury > 0, "the story pays commission");
    assert_eq!(browser.text("#commission").await, usdc(treasury));
    let pool = client.token_balance(&config.insurance_pool).await.unwrap();
    assert_eq!(browser.text("#insurance-pool").await, usdc(pool));
    let provider = client.provider(&story.provider).await.unwrap().unwrap();
    assert_eq!(browser.text("#slashed").await, usdc(provider.slashed_total));
    assert_eq!(
        browser.count("svg").await,
        2,
        "the completion bar and the chart are drawn"
    );
    // The completion rate: one completed of the two that ended (the
    // cancelled job counted apart), under the 80% line drawn on the bar.
    assert_eq!(browser.text("#completion-rate").await, "50.0%");
    assert_eq!(
        browser.text("#completion-verdict").await,
        "below the 80% line"
    );
    assert_eq!(
        browser
            .text("#completion-counts td[data-end='cancelled']")
            .await,
        "1"
    );
    assert_eq!(browser.count("svg.completion-chart line.line").await, 1);
    let job_link = format!("a[href='/job/{}']", story.recovered);
    assert!(browser.count(&job_link).await > 0, "jobs are linked");
    browser.screenshot("overview").await;

    // The recovered job: verified, its bond flow and checkpoints.
    let job = client.job(&story.recovered).await.unwrap().unwrap();
    let job_url = story.url(&format!("/job/{}", story.recovered));
    browser.goto(&job_url).await;
    assert_eq!(browser.text("#audit-badge").await, "verified");
    assert_eq!(browser.count("#checkpoints tr.verified").await, 3);
    assert_eq!(
        browser.text("#commitment").await,
        hex::encode(job.checkpoint_chain)
    );
    assert!(
        browser
            .text("#account-paid")
            .await
            .starts_with(&format!("{} USDC", usdc(job.paid)))
    );
    assert_eq!(
        browser.text("#bond-locked").await,
        usdc(10 * mcjs_localnet::USDC)
    );
    assert_eq!(
        browser.text("#bond-refund").await,
        usdc(10 * mcjs_localnet::USDC - job.paid)
    );
    assert_eq!(
        browser.text("#output-hash").await,
        hex::encode(story.output_hash)
    );
    assert!(
        browser
            .text("#failures")
            .await
            .contains(failure_cause(FailureCause::NodeLost))
    );
    browser.screenshot("job").await;

    browser
        .goto(&story.url(&format!("/job/{}", story.failed)))
        .await;
    assert_eq!(browser.text("#audit-badge").await, "verified");
    assert!(
        browser
            .text("#failures")
            .await
            .contains(failure_cause(FailureCause::JobFatal))
    );
    browser.screenshot("job-failed").await;

    // The provider.
    browser
        .goto(&story.url(&format!("/provider/{}", story.provider)))
        .await;
    assert_eq!(browser.text("#stake").await, usdc(provider.stake));
    assert_eq!(
        browser.text("#jobs-completed").await,
        provider.jobs_completed.to_string()
    );
    assert_eq!(
        browser.text("#failures").await,
        provider.failures.to_string()
    );
    assert_eq!(browser.text("#slashed").await, usdc(provider.slashed_total));
    assert_eq!(browser.count("#nodes tr").await, 1 + 2);
    browser.screenshot("provider").await;

    // A node.
    let node = client.node(&story.nodes[1]).await.unwrap().unwrap();
    browser
        .goto(&story.url(&format!("/node/{}", story.nodes[1])))
        .await;
    assert_eq!(browser.text("#operator").await, node.operator.to_string());
    assert_eq!(browser.text("#gpu-model").await, node.hardware.gpu_model);
    assert_eq!(
        browser.text("#readiness").await,
        format!("{} / 100", node.readiness)
    );
    assert!(
        browser
            .text("#price")
            .await
            .starts_with(&usdc(node.price_per_gpu_hour))
    );
    browser.screenshot("node").await;

    // The program.
    browser.goto(&story.url("/program")).await;
    assert_eq!(browser.text("#program-id").await, mcjs::ID.to_string());
    assert_eq!(browser.text("#admin").await, config.admin.to_string());
    assert_eq!(
        browser.text("#scheduler").await,
        config.scheduler.to_string()
    );
    assert_eq!(
        browser.text("#insurance-pool").await,
        config.insurance_pool.to_string()
    );
    assert!(
        browser
            .text("#commission")
            .await
            .starts_with(&format!("{} bps", config.params.commission_bps))
    );
    assert!(
        browser
            .text("#slash-amount")
            .await
            .starts_with(&usdc(config.params.slash_amount))
    );
    browser.screenshot("program").await;

    // Tamper with the job's commitment: the browser shows where the record
    // stops verifying.
    let mut data = client
        .account(&story.recovered)
        .await
        .unwrap()
        .unwrap()
        .data;
    let at = data
        .windows(32)
        .position(|w| w == job.checkpoint_chain)
        .unwrap();
    data[at] ^= 0xff;
    client
        .surfnet_set_account_data(&story.recovered, &data)
        .await
        .unwrap();
    browser.goto(&job_url).await;
    assert_eq!(browser.text("#audit-badge").await, "not verified");
    let divergence = browser.text("#divergence").await;
    let tampered = hex::encode(&data[at..at + 32]);
    assert!(
        divergence.contains(&format!("the Job account commits to chain {tampered}")),
        "{divergence}"
    );
    assert!(
        divergence.ends_with(&format!(
            "recomputes to {}",
            hex::encode(job.checkpoint_chain)
        )),
        "{divergence}"
    );
    // Every checkpoint's event agrees with the recomputed chain; what
    // diverges is the account's commitment after the last one.
    assert_eq!(browser.count("#checkpoints tr.verified").await, 0);
    assert_eq!(browser.count("#checkpoints tr.consistent").await, 3);
    browser.screenshot("job-tampered").await;

    browser.client.close().await.unwrap();
    drop(driver);
    eprintln!("screenshots in {}", browser.screenshots.display());
    story.localnet.stop();
}
