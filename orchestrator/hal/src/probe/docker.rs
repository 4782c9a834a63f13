//! Is the container runtime reachable? A plain `GET /version` over Docker's unix socket
//! (podman's Docker-compatible service answers the same).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

use crate::profile::ContainerRuntime;

const TIMEOUT: Duration = Duration::from_secs(3);
const MAX_RESPONSE_BYTES: u64 = 1 << 20;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DockerEndpoint {
    Unix(PathBuf),
    /// A `DOCKER_HOST` this probe cannot speak (tcp, ssh); reported as unreachable.
    Unsupported(String),
}

impl DockerEndpoint {
    /// `DOCKER_HOST` when set, else `/var/run/docker.sock`.
    pub fn from_env() -> Self {
        match std::env::var("DOCKER_HOST") {
            Ok(host) if !host.is_empty() => Self::parse(&host),
            _ => Self::Unix(PathBuf::from("/var/run/docker.sock")),
        }
    }

    pub fn parse(host: &str) -> Self {
        match host.strip_prefix("unix://") {
            Some(path) => Self::Unix(PathBuf::from(path)),
            None if host.starts_with('/') => Self::Unix(PathBuf::from(host)),
            None => Self::Unsupported(host.to_string()),
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Self::Unix(p) => format!("unix://{}", p.display()),
            Self::Unsupported(s) => s.clone(),
        }
    }
}

pub fn probe(endpoint: &DockerEndpoint) -> ContainerRuntime {
    let unreachable = |error: String| ContainerRuntime {
        endpoint: endpoint.describe(),
        reachable: false,
        version: None,
        api_version: None,
        error: Some(error),
    };
    let path = match endpoint {
        DockerEndpoint::Unix(p) => p,
        DockerEndpoint::Unsupported(s) => {
            return unreachable(format!("only unix:// docker endpoints are probed, got {s}"));
        }
    };
    match get_version(path) {
        Ok((version, api_version)) => ContainerRuntime {
            endpoint: endpoint.describe(),
            reachable: true,
            version,
            api_version,
            error: None,
        },
        Err(e) => unreachable(e),
    }
}

fn get_version(path: &std::path::Path) -> Result<(Option<String>, Option<String>), String> {
    let mut stream = UnixStream::connect(path)
        .map_err(|e| format!("cannot connect to {}: {e}", path.display()))?;
    stream
        .set_read_timeout(Some(TIMEOUT))
        .map_err(|e| e.to_string())?;
    stream
        .set_write_timeout(Some(TIMEOUT))
        .map_err(|e| e.to_string())?;
    // HTTP/1.0 so the daemon closes the connection and sends no chunked encoding.
    stream
        .write_all(b"GET /version HTTP/1.0\r\nHost: docker\r\nAccept: application/json\r\n\r\n")
        .map_err(|e| format!("cannot send the request: {e}"))?;
    let mut response = Vec::new();
    stream
        .take(MAX_RESPONSE_BYTES)
        .read_to_end(&mut response)
        .map_err(|e| format!("cannot read the response: {e}"))?;
    parse_version_response(&response)
}

/// Status line and JSON body of a `/version` response.
pub fn parse_version_response(response: &[u8]) -> Result<(Option<String>, Option<String>), String> {
    let text = String::from_utf8_lossy(response);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .ok_or("malformed http response")?;
    let status = head.lines().next().unwrap_or_default();
    let code = status.split_whitespace().nth(1).unwrap_or_default();
    if code != "200" {
        return Err(format!("unexpected answer: {status}"));
    }
    let json: serde_json::Value =
        serde_json::from_str(body.trim()).map_err(|e| format!("version body is not json: {e}"))?;
    let field = |k: &str| json.get(k).and_then(|v| v.as_str()).map(str::to_string);
    Ok((field("Version"), field("ApiVersion")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_docker_version_answer() {
        let resp = b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{\"Version\":\"27.3.1\",\"ApiVersion\":\"1.47\"}\n";
        assert_eq!(
            parse_version_response(resp),
            Ok((Some("27.3.1".into()), Some("1.47".into())))
        );
        assert!(parse_version_response(b"HTTP/1.0 404 Not Found\r\n\r\n{}").is_err());
    }

    #[test]
    fn a_missing_socket_is_unreachable_with_a_reason() {
        let rt = probe(&DockerEndpoint::Unix("/nonexistent/docker.sock".into()));
        assert!(!rt.reachable);
        assert!(rt.error.unwrap().contains("/nonexistent/docker.sock"));
        assert!(!probe(&DockerEndpoint::parse("tcp://10.0.0.1:2375")).reachable);
    }
}
