//! The auditor's dashboard (`mcjs dashboard`): a read-only web app over the
//! chain. Every page is server-rendered from what the chain client reads,
//! the job page runs the client's audit live, and every page answers with
//! the same data as JSON when asked with `Accept: application/json`.
//!
//! Routes: `/` (overview; `?window_days=N` sets the completion rate's
//! window), `/job/{address}`, `/provider/{address}` (a
//! Provider account or its owner's wallet), `/node/{address}`, `/program`,
//! `/search?q=ADDRESS`, and `/live?watch=ADDRESS` (server-sent events that
//! tell a page its data changed).
//!
//! # Map
//!
//! - `lib.rs` (this file): the routes (`router`), HTML or JSON by the
//!   `Accept` header, the live updates.
//! - `data.rs`: what each page shows, from the chain alone (histories read
//!   to the newest `HISTORY_CAP` transactions); `data/job_page.rs`: the job
//!   page, with the audit's verdict on its record.
//! - `chart.rs`: jobs by state over the last hour, and the completion rate
//!   (`mcjs_ledger::completion`) against its 80% line, as inline SVG.
//! - `templates/`: the pages (minijinja); `tests.rs`: the pages rendered
//!   from fixed data. docs/dashboard.md is the page for people.

pub mod chart;
pub mod data;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use futures_util::Stream;
use mcjs_client::ChainClient;
use minijinja::{AutoEscape, Environment, Value, context};
use serde::{Deserialize, Serialize};

use crate::data::{DashError, parse_address};
use mcjs_protocol::peer::{PeerLimit, PerPeer, peer_of};
use std::net::IpAddr;

/// How often `/live` looks at the chain.
pub const LIVE_POLL: Duration = Duration::from_secs(2);

/// `/live` streams open at once; one more is answered 503.
pub const MAX_LIVE_STREAMS: usize = 256;

/// `/live` streams one address may hold at once (an IPv6 peer by its /64),
/// so that no single peer takes all [`MAX_LIVE_STREAMS`]; one more is
/// answered 429.
pub const MAX_LIVE_STREAMS_PER_PEER: usize = 8;

/// What one address may ask of the dashboard: 20 requests a second, in
/// bursts of 100 (a page and its live stream are two).
pub const PER_PEER: PeerLimit = PeerLimit {
    period: Duration::from_millis(50),
    burst: 100,
};

struct App {
    client: ChainClient,
    /// The program's accounts followed over the client's websocket: the
    /// live pages' fingerprint of everything is read from it while it is
    /// live, not from three scans of the program.
    index: Option<mcjs_client::rpc::ProgramIndex>,
    templates: Environment<'static>,
    /// The latest fingerprint of each watched address (`None`: everything)
    /// and when it was read (`None`: the read failed): every `/live` stream
    /// watching the same thing shares one chain read per [`LIVE_POLL`],
    /// a failed one too, so that a slow or failing chain costs no more
    /// reads however many pages watch.
    live: tokio::sync::Mutex<
        std::collections::HashMap<
            Option<mcjs_client::Pubkey>,
            (std::time::Instant, Option<String>),
        >,
    >,
    live_streams: std::sync::atomic::AtomicUsize,
    /// `/live` streams open per peer address; an address leaves the map
    /// with its last stream.
    live_per_peer: std::sync::Mutex<std::collections::HashMap<IpAddr, usize>>,
}

impl App {
    /// The fingerprint of what `watch` names, read at most once per
    /// [`LIVE_POLL`] for every stream; `None` while the chain cannot be read.
    async fn fingerprint(&self, watch: Option<mcjs_client::Pubkey>) -> Option<String> {
        let mut cache = self.live.lock().await;
        if let Some((at, print)) = cache.get(&watch)
            && at.elapsed() < LIVE_POLL
        {
            return print.clone();
        }
        let indexed = match (&watch, &self.index) {
            (None, Some(index)) => {
                index.live(|s| data::fingerprint_of(&s.jobs(), &s.nodes(), &s.providers()))
            }
            _ => None,
        };
        let print = match indexed {
            Some(print) => Some(print),
            None => match data::fingerprint(&self.client, watch.as_ref()).await {
                Ok(print) => Some(print),
                Err(e) => {
                    tracing::debug!(error = %e, "live update: the chain could not be read");
                    None
                }
            },
        };
        cache.retain(|_, (at, _)| at.elapsed() < LIVE_POLL * 10);
        cache.insert(watch, (std::time::Instant::now(), print.clone()));
        print
    }
}

/// Holds one of the [`MAX_LIVE_STREAMS`] places, and one of its peer's
/// [`MAX_LIVE_STREAMS_PER_PEER`], while its stream lives.
struct LiveSlot(Arc<App>, IpAddr);

/// Why a `/live` stream was not opened.
enum NoSlot {
    Full,
    PeerFull,
}

impl LiveSlot {
    fn take(app: &Arc<App>, peer: IpAddr) -> Result<Self, NoSlot> {
        use std::sync::atomic::Ordering;
        let mut per_peer = app.live_per_peer.lock().expect("live peers lock");
        if per_peer.get(&peer).copied().unwrap_or(0) >= MAX_LIVE_STREAMS_PER_PEER {
            return Err(NoSlot::PeerFull);
        }
        app.live_streams
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_LIVE_STREAMS).then_some(n + 1)
            })
            .map_err(|_| NoSlot::Full)?;
        *per_peer.entry(peer).or_default() += 1;
        Ok(LiveSlot(Arc::clone(app), peer))
    }
}

impl Drop for LiveSlot {
    fn drop(&mut self) {
        {
            let mut per_peer = self.0.live_per_peer.lock().expect("live peers lock");
            if let Some(held) = per_peer.get_mut(&self.1) {
                *held = held.saturating_sub(1);
                if *held == 0 {
                    per_peer.remove(&self.1);
                }
            }
        }
        self.0
            .live_streams
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// The dashboard's routes over a chain client.
pub fn router(client: ChainClient) -> Router {
    // Followed only where a runtime runs the router (always, when served).
    let index = tokio::runtime::Handle::try_current()
        .ok()
        .map(|_| mcjs_client::rpc::ProgramIndex::follow(client.clone()));
    let app = Arc::new(App {
        client,
        index,
        templates: templates(),
        live: Default::default(),
        live_streams: Default::default(),
        live_per_peer: Default::default(),
    });
    Router::new()
        .route("/", get(overview))
        .route("/job/{key}", get(job))
        .route("/provider/{key}", get(provider))
        .route("/node/{key}", get(node))
        .route("/program", get(program))
        .route("/search", get(search))
        .route("/live", get(live))
        .fallback(not_found)
        .with_state(app)
}

/// Serves the dashboard on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    client: ChainClient,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let per_peer = PerPeer::new(PER_PEER);
    let app = router(client).layer(per_peer.layer());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(per_peer.forget_idle_every(Duration::from_secs(60), async {
        let _ = stopped.await;
    }));
    let served = axum::serve(
        listener,
        app.into_make_service_with_connect_info::<std::net::SocketAddr>(),
    )
    .with_graceful_shutdown(shutdown)
    .await;
    let _ = stop.send(());
    served
}

fn templates() -> Environment<'static> {
    let mut env = Environment::new();
    // Every template is HTML: escape every value, whatever its name.
    env.set_auto_escape_callback(|_| AutoEscape::Html);
    for (name, source) in [
        ("base.html", include_str!("../templates/base.html")),
        ("macros.html", include_str!("../templates/macros.html")),
        ("overview.html", include_str!("../templates/overview.html")),
        ("job.html", include_str!("../templates/job.html")),
        ("provider.html", include_str!("../templates/provider.html")),
        ("node.html", include_str!("../templates/node.html")),
        ("program.html", include_str!("../templates/program.html")),
        ("error.html", include_str!("../templates/error.html")),
    ] {
        env.add_template(name, source)
            .expect("the dashboard's templates parse");
    }
    env.add_filter("usdc", |base_units: u64| {
        mcjs_client::history::usdc(base_units)
    });
    env.add_filter("time", |unix: i64| format_time(unix));
    env.add_filter("short", |text: String| short(&text));
    env.add_filter("percent", |rate: f64| format!("{:.1}%", rate * 100.0));
    env.add_filter("hours", |seconds: u64| {
        format!("{:.1}", seconds as f64 / 3_600.0)
    });
    env.add_filter("fixed2", |x: f64| format!("{x:.2}"));
    env
}

/// A chain timestamp as people read it, in UTC.
pub fn format_time(unix: i64) -> String {
    let format =
        time::macros::format_description!("[year]-[month]-[day] [hour]:[minute]:[second] UTC");
    time::OffsetDateTime::from_unix_timestamp(unix)
        .ok()
        .and_then(|t| t.format(format).ok())
        .unwrap_or_else(|| unix.to_string())
}

/// The start and end of a long address or hash, for tables.
fn short(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    if chars.len() <= 14 {
        return text.to_string();
    }
    let head: String = chars[..6].iter().collect();
    let tail: String = chars[chars.len() - 6..].iter().collect();
    format!("{head}…{tail}")
}

fn wants_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|accept| {
            accept
                .split(',')
                .any(|part| part.trim().starts_with("application/json"))
        })
}

impl App {
    fn page<T: Serialize>(
        &self,
        headers: &HeaderMap,
        template: &str,
        title: &str,
        watch: Option<&str>,
        value: &T,
        extra: Value,
    ) -> Response {
        if wants_json(headers) {
            return axum::Json(value).into_response();
        }
        let rendered = self.templates.get_template(template).and_then(|t| {
            t.render(context! {
                page => Value::from_serialize(value),
                title => title,
                watch => watch,
                extra => extra,
            })
        });
        match rendered {
            Ok(html) => Html(html).into_response(),
            Err(e) => {
                tracing::error!(template, error = %e, "a page failed to render");
                self.error(
                    headers,
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "the page could not be rendered",
                )
            }
        }
    }

    fn error(&self, headers: &HeaderMap, status: StatusCode, message: &str) -> Response {
        #[derive(Serialize)]
        struct Body<'a> {
            status: u16,
            error: &'a str,
        }
        if wants_json(headers) {
            return (
                status,
                axum::Json(Body {
                    status: status.as_u16(),
                    error: message,
                }),
            )
                .into_response();
        }
        let html = self
            .templates
            .get_template("error.html")
            .and_then(|t| {
                t.render(context! {
                    title => status.canonical_reason().unwrap_or("error"),
                    status => status.as_u16(),
                    message => message,
                    watch => None::<&str>,
                })
            })
            .unwrap_or_else(|_| "error".into());
        (status, Html(html)).into_response()
    }

    fn fail(&self, headers: &HeaderMap, err: DashError) -> Response {
        let status = match &err {
            DashError::BadRequest(_) => StatusCode::BAD_REQUEST,
            DashError::NotFound(_) => StatusCode::NOT_FOUND,
            DashError::Chain(e) => {
                tracing::warn!(error = %e, "the chain could not be read");
                StatusCode::BAD_GATEWAY
            }
        };
        self.error(headers, status, &err.to_string())
    }
}

type AppState = State<Arc<App>>;

#[derive(Deserialize)]
struct OverviewQuery {
    /// The completion rate's window, in days of chain time.
    window_days: Option<String>,
}

async fn overview(
    State(app): AppState,
    headers: HeaderMap,
    Query(query): Query<OverviewQuery>,
) -> Response {
    let result = async {
        let window_days = data::parse_window_days(query.window_days.as_deref())?;
        data::overview(&app.client, window_days).await
    }
    .await;
    match result {
        Ok(o) => {
            let svg = chart::svg(&o.timeline);
            let completion = chart::completion_svg(&o.completion);
            let colours: Vec<(&str, &str)> = data::JOB_STATES
                .iter()
                .map(|s| (*s, chart::colour(s)))
                .collect();
            app.page(
                &headers,
                "overview.html",
                "Overview",
                None,
                &o,
                context! {
                    chart => Value::from_safe_string(svg),
                    colours => colours,
                    completion_chart => Value::from_safe_string(completion),
                    window_days => o.completion.window_secs / 86_400,
                },
            )
        }
        Err(e) => app.fail(&headers, e),
    }
}

async fn job(State(app): AppState, headers: HeaderMap, Path(key): Path<String>) -> Response {
    let result = async {
        let key = parse_address(&key, "job")?;
        data::job(&app.client, &key).await
    }
    .await;
    match result {
        Ok(view) => {
            let title = format!("Job {}", short(&view.key));
            app.page(
                &headers,
                "job.html",
                &title,
                Some(&view.key),
                &view,
                Value::UNDEFINED,
            )
        }
        Err(e) => app.fail(&headers, e),
    }
}

async fn provider(State(app): AppState, headers: HeaderMap, Path(key): Path<String>) -> Response {
    let result = async {
        let key = parse_address(&key, "provider")?;
        data::provider(&app.client, &key).await
    }
    .await;
    match result {
        Ok(view) => {
            let title = format!("Provider {}", short(&view.key));
            app.page(
                &headers,
                "provider.html",
                &title,
                Some(&view.key),
                &view,
                Value::UNDEFINED,
            )
        }
        Err(e) => app.fail(&headers, e),
    }
}

async fn node(State(app): AppState, headers: HeaderMap, Path(key): Path<String>) -> Response {
    let result = async {
        let key = parse_address(&key, "node")?;
        data::node(&app.client, &key).await
    }
    .await;
    match result {
        Ok(view) => {
            let title = format!("Node {}", short(&view.key));
            app.page(
                &headers,
                "node.html",
                &title,
                Some(&view.key),
                &view,
                Value::UNDEFINED,
            )
        }
        Err(e) => app.fail(&headers, e),
    }
}

async fn program(State(app): AppState, headers: HeaderMap) -> Response {
    match data::program(&app.client).await {
        Ok(view) => app.page(
            &headers,
            "program.html",
            "Program",
            None,
            &view,
            Value::UNDEFINED,
        ),
        Err(e) => app.fail(&headers, e),
    }
}

#[derive(Deserialize)]
struct SearchQuery {
    #[serde(default)]
    q: String,
}

#[derive(Serialize)]
struct Located {
    address: String,
    url: String,
}

async fn search(
    State(app): AppState,
    headers: HeaderMap,
    Query(query): Query<SearchQuery>,
) -> Response {
    let result = async {
        let key = parse_address(&query.q, "searched")?;
        Ok::<_, DashError>((key, data::locate(&app.client, &key).await?))
    }
    .await;
    match result {
        Ok((key, url)) if wants_json(&headers) => axum::Json(Located {
            address: key.to_string(),
            url,
        })
        .into_response(),
        Ok((_, url)) => Redirect::to(&url).into_response(),
        Err(e) => app.fail(&headers, e),
    }
}

#[derive(Deserialize)]
struct LiveQuery {
    watch: Option<String>,
}

/// Server-sent events: the fingerprint of the watched data now and whenever
/// it changes. The page reloads when it differs from the first one it got.
async fn live(
    State(app): AppState,
    headers: HeaderMap,
    extensions: axum::http::Extensions,
    Query(query): Query<LiveQuery>,
) -> Response {
    let watch = match query.watch.as_deref().map(|w| parse_address(w, "watched")) {
        None => None,
        Some(Ok(key)) => Some(key),
        Some(Err(e)) => return app.fail(&headers, e),
    };
    let slot = match LiveSlot::take(&app, peer_of(&extensions)) {
        Ok(slot) => slot,
        Err(NoSlot::Full) => {
            return app.error(
                &headers,
                StatusCode::SERVICE_UNAVAILABLE,
                "too many live pages are open; reload later",
            );
        }
        Err(NoSlot::PeerFull) => {
            return app.error(
                &headers,
                StatusCode::TOO_MANY_REQUESTS,
                &format!(
                    "this address has {MAX_LIVE_STREAMS_PER_PEER} live pages open already; close one"
                ),
            );
        }
    };
    Sse::new(fingerprints(app, watch, slot))
        .keep_alive(KeepAlive::default())
        .into_response()
}

fn fingerprints(
    app: Arc<App>,
    watch: Option<mcjs_client::Pubkey>,
    slot: LiveSlot,
) -> impl Stream<Item = Result<Event, Infallible>> {
    futures_util::stream::unfold(None::<String>, move |last| {
        let app = app.clone();
        // The place is given back when the stream (and this closure) goes.
        let _slot = &slot;
        async move {
            loop {
                if last.is_some() {
                    tokio::time::sleep(LIVE_POLL).await;
                }
                // A chain that cannot be read now is tried again at the next poll.
                match app.fingerprint(watch).await {
                    Some(print) if last.as_ref() != Some(&print) => {
                        return Some((Ok(Event::default().data(print.clone())), Some(print)));
                    }
                    Some(_) => {}
                    None => {
                        if last.is_none() {
                            tokio::time::sleep(LIVE_POLL).await;
                        }
                    }
                }
            }
        }
    })
}

async fn not_found(State(app): AppState, headers: HeaderMap) -> Response {
    app.error(&headers, StatusCode::NOT_FOUND, "no such page")
}

#[cfg(test)]
mod tests;
