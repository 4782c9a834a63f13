//! Unit tests of data staging: the cache, the provider's policy on
//! `file://` and http(s) inputs, and the internal-address checks.

use super::*;
use std::net::SocketAddr;

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn file_input(name: &str, path: &Path, sha256: String) -> InputToStage {
    InputToStage {
        name: name.into(),
        uri: url::Url::from_file_path(path).unwrap().to_string(),
        sha256,
        max_bytes: None,
    }
}

/// A cache whose provider allows `root` as a data root.
fn cache_with_root(t: &Path, root: &Path) -> DataCache {
    DataCache::with_policy(
        t.join("cache"),
        StagingPolicy {
            data_roots: vec![root.to_path_buf()],
            ..StagingPolicy::default()
        },
    )
}

fn http_input(uri: String, body: &[u8]) -> InputToStage {
    InputToStage {
        name: "train.csv".into(),
        uri,
        sha256: sha(body),
        max_bytes: None,
    }
}

/// Serves `response` (head and body) to each of `n` connections.
fn serve(n: usize, response: impl Fn(&mut std::net::TcpStream) + Send + 'static) -> SocketAddr {
    use std::io::Read;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for _ in 0..n {
            let Ok((mut conn, _)) = listener.accept() else {
                return;
            };
            let mut req = [0u8; 1024];
            let _ = conn.read(&mut req);
            response(&mut conn);
        }
    });
    addr
}

fn ok_response(body: Vec<u8>) -> impl Fn(&mut std::net::TcpStream) + Send + 'static {
    move |conn| {
        use std::io::Write;
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let _ = conn.write_all(head.as_bytes());
        let _ = conn.write_all(&body);
    }
}

#[tokio::test]
async fn a_verified_input_lands_in_the_cache_and_the_data_dir() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src.csv");
    std::fs::write(&src, b"1,2,0\n").unwrap();
    let cache = cache_with_root(t.path(), t.path());
    let data = t.path().join("data");
    let inputs = [file_input("train.csv", &src, sha(b"1,2,0\n"))];
    let staged = cache.stage(&inputs, &data).await.unwrap();
    assert_eq!(staged[0].size, 6);
    assert!(!staged[0].cached);
    assert_eq!(std::fs::read(data.join("train.csv")).unwrap(), b"1,2,0\n");
    assert!(cache.blob_path(&staged[0].sha256).exists());
    // Second time: from the cache.
    let again = cache.stage(&inputs, &t.path().join("data2")).await.unwrap();
    assert!(again[0].cached);
}

#[tokio::test]
async fn the_cache_does_not_lend_a_blob_to_a_file_uri_outside_the_data_roots() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("datasets");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("private.csv"), b"another job's data").unwrap();
    let cache = cache_with_root(t.path(), &root);
    let hash = sha(b"another job's data");
    let owner = file_input("a", &root.join("private.csv"), hash.clone());
    cache.stage(&[owner], &t.path().join("d1")).await.unwrap();
    // The blob is cached now; a URI outside the roots with its hash gets nothing.
    let thief = file_input("a", Path::new("/etc/hostname"), hash);
    let err = cache
        .stage(&[thief], &t.path().join("d2"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains(FILE_REFUSED), "{err}");
    assert!(!t.path().join("d2/a").exists());
}

#[tokio::test]
async fn a_hash_mismatch_on_a_host_file_is_refused_without_revealing_its_hash() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src.csv");
    std::fs::write(&src, b"tampered").unwrap();
    let cache = cache_with_root(t.path(), t.path());
    let want = sha(b"original");
    let err = cache
        .stage(
            &[file_input("train.csv", &src, want.clone())],
            &t.path().join("data"),
        )
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, StagingError::Refused { index: 0, .. }),
        "{msg}"
    );
    assert!(!msg.contains(&sha(b"tampered")), "{msg}");
    assert!(msg.contains(FILE_REFUSED), "{msg}");
    assert!(
        !cache
            .blob_path(&Sha256Digest::from_hex(&want).unwrap())
            .exists()
    );
    assert!(!t.path().join("data/train.csv").exists());
    assert_eq!(
        std::fs::read_dir(t.path().join("cache/tmp"))
            .unwrap()
            .count(),
        0
    );
}

#[tokio::test]
async fn host_files_outside_the_data_roots_read_exactly_like_missing_ones() {
    let t = tempfile::tempdir().unwrap();
    let root = t.path().join("datasets");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(t.path().join("secret"), b"host secret").unwrap();
    std::os::unix::fs::symlink(t.path().join("secret"), root.join("link")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", root.join("zero")).unwrap();
    let cache = cache_with_root(t.path(), &root);
    let mut messages = Vec::new();
    for path in [
        PathBuf::from("/dev/zero"),
        PathBuf::from("/etc/passwd"),
        t.path().join("secret"),
        root.join("link"),
        root.join("zero"),
        root.join("../secret"),
        root.join("missing"),
    ] {
        // Even with the right hash: the host file is not the job's.
        let input = file_input("x", &path, sha(b"host secret"));
        let err = tokio::time::timeout(
            Duration::from_secs(10),
            cache.stage(&[input], &t.path().join("data")),
        )
        .await
        .expect("never hangs")
        .unwrap_err();
        assert!(err.is_job_fault(), "{err}");
        messages.push(
            err.to_string()
                .replace(&url::Url::from_file_path(&path).unwrap().to_string(), ""),
        );
    }
    let first = &messages[0];
    assert!(messages.iter().all(|m| m == first), "{messages:#?}");
}

#[tokio::test]
async fn without_a_data_root_no_file_input_is_taken() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("src");
    std::fs::write(&src, b"x").unwrap();
    let cache = DataCache::new(t.path().join("cache"));
    let err = cache
        .stage(&[file_input("x", &src, sha(b"x"))], &t.path().join("data"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no file:// inputs"), "{err}");
}

#[tokio::test]
async fn an_input_over_its_size_is_cut_off_while_streaming() {
    let t = tempfile::tempdir().unwrap();
    let src = t.path().join("big");
    std::fs::write(&src, vec![7u8; 10_000]).unwrap();
    let cache = cache_with_root(t.path(), t.path());
    let mut input = file_input("big", &src, sha(&vec![7u8; 10_000]));
    input.max_bytes = Some(4096);
    let err = cache
        .stage(&[input.clone()], &t.path().join("data"))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("limit of 4096 bytes"), "{err}");
    input.max_bytes = Some(10_000);
    cache.stage(&[input], &t.path().join("data")).await.unwrap();
}

#[tokio::test]
async fn bad_declarations_are_refused_before_fetching() {
    let t = tempfile::tempdir().unwrap();
    let cache = cache_with_root(t.path(), t.path());
    let mut i = file_input("../escape", Path::new("/nonexistent"), sha(b""));
    let err = cache.stage(&[i.clone()], t.path()).await.unwrap_err();
    assert!(err.to_string().contains("plain file name"), "{err}");
    i.name = "ok".into();
    i.sha256 = "abc".into();
    let err = cache.stage(&[i.clone()], t.path()).await.unwrap_err();
    assert!(err.to_string().contains("64 lowercase hex"), "{err}");
    i.sha256 = sha(b"");
    i.uri = "ftp://example.org/x".into();
    let err = cache.stage(&[i], t.path()).await.unwrap_err();
    assert!(err.to_string().contains("unsupported scheme"), "{err}");
}

#[tokio::test]
async fn inputs_are_fetched_over_http_where_the_provider_allows_its_network() {
    let body = b"0.5,0.25,1\n".to_vec();
    let addr = serve(1, ok_response(body.clone()));
    let t = tempfile::tempdir().unwrap();
    let cache = DataCache::with_policy(
        t.path().join("cache"),
        StagingPolicy {
            allow_private: true,
            ..StagingPolicy::default()
        },
    );
    let input = http_input(format!("http://{addr}/train.csv"), &body);
    cache.stage(&[input], &t.path().join("data")).await.unwrap();
    assert_eq!(
        std::fs::read(t.path().join("data/train.csv")).unwrap(),
        body
    );
}

#[tokio::test]
async fn loopback_and_metadata_addresses_are_refused_by_default() {
    let body = b"internal".to_vec();
    let addr = serve(3, ok_response(body.clone()));
    let t = tempfile::tempdir().unwrap();
    let cache = DataCache::new(t.path().join("cache"));
    for uri in [
        format!("http://{addr}/x"),
        format!("http://localhost:{}/x", addr.port()),
        format!("http://[::ffff:127.0.0.1]:{}/x", addr.port()),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "http://[fd00:ec2::254]/latest/meta-data/".to_string(),
    ] {
        let err = cache
            .stage(&[http_input(uri.clone(), &body)], &t.path().join("data"))
            .await
            .unwrap_err();
        let msg = err.to_string();
        assert!(err.is_job_fault(), "{msg}");
        assert!(msg.contains("internal address"), "{uri}: {msg}");
    }
    assert!(!t.path().join("data/train.csv").exists());
}

#[tokio::test]
async fn a_redirect_to_an_internal_address_is_refused() {
    let inner = serve(1, ok_response(b"internal".to_vec()));
    let outer = serve(1, move |conn| {
        use std::io::Write;
        let head = format!(
            "HTTP/1.1 302 Found\r\nLocation: http://{inner}/x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        let _ = conn.write_all(head.as_bytes());
    });
    // The client alone (without fetch's check of the first URL) reaches
    // the outer server on loopback; its redirect policy must refuse the rest.
    let client = http_client(&StagingPolicy::default());
    let err = client
        .get(format!("http://{outer}/x"))
        .send()
        .await
        .unwrap_err();
    assert!(
        error_chain(&err).contains("internal address"),
        "{}",
        error_chain(&err)
    );
}

#[test]
fn internal_addresses_are_recognised() {
    for ip in [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "255.255.255.255",
        "224.0.0.1",
        "::1",
        "::",
        "fd00:ec2::254",
        "fe80::1",
        "::ffff:10.0.0.1",
        "64:ff9b::a9fe:a9fe",
        "2002:7f00:1::",
    ] {
        assert!(is_internal(ip.parse().unwrap()), "{ip}");
    }
    for ip in ["1.1.1.1", "8.8.8.8", "2606:4700::1111", "100.128.0.1"] {
        assert!(!is_internal(ip.parse().unwrap()), "{ip}");
    }
}

#[test]
fn a_spec_input_is_staged_by_its_name_uri_and_hash_as_the_spec_writes_them() {
    let sha256 = "0123456789abcdef".repeat(4);
    let input = mcjs_spec::DataInput {
        name: "train.csv".parse().unwrap(),
        role: mcjs_spec::DataRole::Dataset,
        uri: "https://data.example.org/train.csv".parse().unwrap(),
        sha256: sha256.parse().unwrap(),
        size: None,
    };
    assert_eq!(
        InputToStage::declared(&input, 4096),
        InputToStage {
            name: "train.csv".into(),
            uri: "https://data.example.org/train.csv".into(),
            sha256,
            max_bytes: Some(4096),
        }
    );
}
