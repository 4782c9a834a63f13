//! Latency and throughput to the checkpoint store and the RPC endpoint: TCP connect time
//! (median of a few attempts) and one HTTP GET timed to its last body byte.

use std::time::{Duration, Instant};

use tokio::net::TcpStream;

use crate::profile::{MIB, NetworkMeasurement};

const CONNECT_ATTEMPTS: usize = 3;
const TIMEOUT: Duration = Duration::from_secs(10);
/// The GET stops counting after this many bytes, so a huge object cannot stall the probe.
const MAX_GET_BYTES: u64 = 256 << 20;

/// Measures every (name, url) target; failures are recorded per target, never returned.
pub async fn measure_all(targets: &[(String, String)]) -> Vec<NetworkMeasurement> {
    let mut out = Vec::with_capacity(targets.len());
    for (name, url) in targets {
        out.push(measure(name, url).await);
    }
    out
}

pub async fn measure(target: &str, url: &str) -> NetworkMeasurement {
    let mut m = NetworkMeasurement {
        target: target.to_string(),
        url: url.to_string(),
        connect_ms: None,
        http_status: None,
        http_bytes: None,
        http_ms: None,
        throughput_mibps: None,
        error: None,
    };
    if let Err(e) = measure_into(&mut m, url).await {
        m.error = Some(e);
    }
    m
}

async fn measure_into(m: &mut NetworkMeasurement, url: &str) -> Result<(), String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("invalid url {url}: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "only http and https targets are measured, got {}",
            parsed.scheme()
        ));
    }
    let host = parsed
        .host_str()
        .ok_or_else(|| format!("url {url} has no host"))?
        .to_string();
    let port = parsed.port_or_known_default().unwrap_or(80);

    let mut connects = Vec::with_capacity(CONNECT_ATTEMPTS);
    for _ in 0..CONNECT_ATTEMPTS {
        let start = Instant::now();
        tokio::time::timeout(TIMEOUT, TcpStream::connect((host.as_str(), port)))
            .await
            .map_err(|_| format!("tcp connect to {host}:{port} timed out"))?
            .map_err(|e| format!("tcp connect to {host}:{port} failed: {e}"))?;
        connects.push(start.elapsed().as_secs_f64() * 1000.0);
    }
    connects.sort_by(f64::total_cmp);
    m.connect_ms = Some(connects[connects.len() / 2]);

    let client = reqwest::Client::builder()
        .timeout(TIMEOUT)
        .build()
        .map_err(|e| format!("cannot build an http client: {e}"))?;
    let start = Instant::now();
    let mut response = client
        .get(parsed)
        .send()
        .await
        .map_err(|e| format!("http get failed: {e}"))?;
    m.http_status = Some(response.status().as_u16());
    let mut bytes = 0u64;
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|e| format!("http body failed: {e}"))?
    {
        bytes += chunk.len() as u64;
        if bytes >= MAX_GET_BYTES {
            break;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    m.http_bytes = Some(bytes);
    m.http_ms = Some(secs * 1000.0);
    m.throughput_mibps = Some(bytes as f64 / MIB / secs.max(1e-9));
    Ok(())
}
