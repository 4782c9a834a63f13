//! `mcjs job output`: a job's results, verified against the chain before
//! they are kept.
//!
//! The output's descriptor and files come from the store, which the
//! provider wrote; only the hash on chain is trusted. The list of files
//! must hash to the attested output hash, and every file to its entry, or
//! nothing is written. Delivery to the user's own S3 bucket happens here,
//! on the user's machine, with the user's credentials, after verification:
//! no provider and no scheduler ever holds them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context, anyhow, bail};
use mcjs::state::JobState;
use mcjs_client::{ChainClient, Signer};
use mcjs_protocol::store::{Role, StoreUrl};
use mcjs_runtime::checkpoint::Sha256Digest;
use mcjs_runtime::store::{CheckpointStore, ExpectedCheckpoint, download_verified};
use object_store::ObjectStore;
use object_store::path::Path as ObjectPath;
use serde::Serialize;

use crate::chain::{Ctx, parse_pubkey};
use crate::cmd::job::StoreArgs;
use crate::output::OutputFormat;
use crate::{EXIT_OK, GlobalArgs};

#[derive(Serialize)]
struct Delivered {
    job: String,
    /// "output" or "partial".
    kind: &'static str,
    /// The attested hash everything was verified against.
    hash: String,
    /// For a partial: the checkpoint's step.
    #[serde(skip_serializing_if = "Option::is_none")]
    step: Option<u64>,
    files: Vec<DeliveredFile>,
    bytes: u64,
    /// Where the verified files are.
    to: String,
    /// Where the job's printed lines were kept (a local destination).
    #[serde(skip_serializing_if = "Option::is_none")]
    logs: Option<String>,
    /// Where the job's metrics were kept, as CSV (when it wrote any).
    #[serde(skip_serializing_if = "Option::is_none")]
    metrics: Option<String>,
}

#[derive(Serialize)]
struct DeliveredFile {
    path: String,
    size: u64,
    sha256: String,
}

impl std::fmt::Display for Delivered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match self.step {
            Some(step) => format!("checkpoint at step {step}"),
            None => "output".to_string(),
        };
        writeln!(
            f,
            "{} files ({} bytes) of job {}'s {what}, verified against the attested hash {}",
            self.files.len(),
            self.bytes,
            self.job,
            self.hash
        )?;
        for file in &self.files {
            writeln!(f, "  {}  {:>12}  {}", file.sha256, file.size, file.path)?;
        }
        write!(f, "saved to {}", self.to)?;
        if let Some(logs) = &self.logs {
            write!(f, "\nwhat it printed: {logs}")?;
        }
        if let Some(metrics) = &self.metrics {
            write!(f, "\nits metrics: {metrics}")?;
        }
        Ok(())
    }
}

/// What `mcjs job output` is asked for.
pub struct Fetch {
    /// Where to put it (default: the spec's s3:// destination, else
    /// `<job>-output`).
    pub to: Option<String>,
    /// The last attested checkpoint instead of the output.
    pub partial: bool,
    /// Keep the job's logs and metrics beside a local output.
    pub keep_logs: bool,
}

pub async fn run(
    ctx: &Ctx,
    client: &ChainClient,
    global: &GlobalArgs,
    job: &str,
    fetch: Fetch,
    store_args: &StoreArgs,
) -> anyhow::Result<u8> {
    let Fetch {
        to,
        partial,
        keep_logs,
    } = fetch;
    let key = parse_pubkey(job, "job")?;
    let (store, job) =
        crate::cmd::job::open_owners_store(ctx, client, &key, store_args, "output from the store")
            .await?;

    // Its caps bound what the store may make this machine download.
    let spec = mcjs_runtime::spec_store::get_spec(store.as_ref(), &job.spec_hash)
        .await
        .context("cannot read the job's spec from the store")?;
    // Where the verified files go: a local directory, then, for an s3://
    // destination, the user's bucket.
    let destination = match &to {
        Some(to) => to.clone(),
        None => match spec.output.destination.as_str() {
            d if d.starts_with("s3://") => d.to_string(),
            _ => format!("{key}-output"),
        },
    };
    let remote: Option<StoreUrl> = if destination.starts_with("s3://") {
        Some(
            destination
                .parse()
                .with_context(|| format!("the destination {destination}"))?,
        )
    } else {
        None
    };
    let scratch = tempdir_near(remote.is_some())?;
    let local: PathBuf = match &remote {
        Some(_) => scratch.as_ref().expect("scratch").path().join("output"),
        None => PathBuf::from(&destination),
    };
    if remote.is_none() && local.exists() {
        bail!(
            "{} already exists: choose another directory with --to, or remove it",
            local.display()
        );
    }

    let bar = progress(global);
    let show = {
        let bar = bar.clone();
        move |n: u64| {
            if let Some(bar) = &bar {
                bar.set_position(n);
            }
        }
    };
    let (hash, step, files) = if partial {
        if !spec.output.return_partial {
            bail!(
                "job {key}'s spec does not ask for partial results (output.return_partial is false): only the completed output can be downloaded"
            );
        }
        let Some(last) = job.last_checkpoint else {
            bail!("job {key} has no attested checkpoint yet");
        };
        let checkpoints = CheckpointStore::new(Arc::clone(&store), 1);
        let parent = local
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
        let work = tempfile::Builder::new()
            .prefix(".mcjs-partial-")
            .tempdir_in(&parent)
            .with_context(|| format!("cannot write in {}", parent.display()))?;
        let restored = checkpoints
            .restore(
                &key.to_string(),
                &[ExpectedCheckpoint {
                    step: last.step,
                    hash: Sha256Digest(last.hash),
                }],
                mcjs_runtime::limits::checkpoint_limits(&spec),
                work.path(),
            )
            .await
            .context("the last attested checkpoint cannot be delivered")?;
        std::fs::rename(&restored.dir, &local)
            .with_context(|| format!("cannot move the checkpoint into {}", local.display()))?;
        (
            Sha256Digest(last.hash),
            Some(last.step),
            restored.checkpoint.files,
        )
    } else {
        let Some(attested) = job.output_hash else {
            if job.at_cap() {
                bail!(
                    "job {key} reached its maximum duration ({} s) before it completed, so it was stopped there{}",
                    job.terms.max_duration_secs,
                    if spec.output.return_partial {
                        format!(
                            ": its partial output is its last attested checkpoint, `mcjs job output {key} --partial`"
                        )
                    } else {
                        ": its spec did not ask for partial results (output.return_partial), but its checkpoints stay yours in the store".to_string()
                    }
                );
            }
            bail!(
                "job {key} is {}: its output is attested on completion{}",
                format!("{:?}", job.state)
                    .split_whitespace()
                    .next()
                    .unwrap_or("not completed")
                    .to_lowercase(),
                if matches!(job.state, JobState::Completed { .. }) {
                    ""
                } else {
                    " (`--partial` gives the last attested checkpoint when the spec asked for it)"
                }
            );
        };
        // The completing generation's output: a node fenced off the job
        // writes only under its own generation.
        let generation = job
            .completed_generation()
            .context("a completed job has a completing generation")?;
        let prefix = mcjs_runtime::output::output_prefix(&key.to_string(), generation);
        let descriptor_path = ObjectPath::from(format!("{prefix}/output.json"));
        let found = store
            .get(&descriptor_path)
            .await
            .with_context(|| format!("cannot read {descriptor_path} from the store"))?;
        if found.meta.size > mcjs_runtime::output::MAX_DESCRIPTOR_BYTES {
            bail!(
                "{descriptor_path} is {} bytes, over the {} bytes an output descriptor can be; nothing was fetched",
                found.meta.size,
                mcjs_runtime::output::MAX_DESCRIPTOR_BYTES
            );
        }
        let bytes = found.bytes().await?;
        let descriptor: mcjs_runtime::output::StoredOutput = serde_json::from_slice(&bytes)
            .with_context(|| format!("{descriptor_path} is not an output descriptor"))?;
        if let Some(bar) = &bar {
            bar.set_length(
                descriptor
                    .files
                    .iter()
                    .fold(0u64, |sum, f| sum.saturating_add(f.size)),
            );
        }
        let digest = download_verified(
            &store,
            &descriptor.files_prefix(&prefix).with_context(|| {
                format!(
                    "{descriptor_path} names its files under {:?}, which no agent writes; nothing was fetched",
                    descriptor.attempt
                )
            })?,
            &descriptor.files,
            Sha256Digest(attested),
            mcjs_runtime::limits::output_limits(&spec),
            &local,
            &show,
        )
        .await?;
        (digest.hash, None, digest.files)
    };
    if let Some(bar) = &bar {
        bar.finish_and_clear();
    }
    let to_shown = match &remote {
        Some(url) => {
            deliver_to_s3(url, &local, &files).await?;
            url.to_string()
        }
        None => std::fs::canonicalize(&local)
            .unwrap_or(local.clone())
            .display()
            .to_string(),
    };
    // What the job printed and its metrics, kept beside a local output:
    // the store keeps them only as long as the job's objects.
    let (logs, metrics) = if keep_logs && remote.is_none() {
        keep_transcript(client, &store, &key, &local).await
    } else {
        (None, None)
    };
    global.output.print(&Delivered {
        job: key.to_string(),
        kind: if partial { "partial" } else { "output" },
        hash: hash.to_hex(),
        step,
        bytes: files.iter().map(|f| f.size).sum(),
        files: files
            .into_iter()
            .map(|f| DeliveredFile {
                path: f.path,
                size: f.size,
                sha256: f.sha256.to_hex(),
            })
            .collect(),
        to: to_shown,
        logs,
        metrics,
    })?;
    Ok(EXIT_OK)
}

/// Writes the job's transcript to `<local>.logs.txt` and its metrics to
/// `<local>.metrics.csv` (where there are any), and says where. A store
/// that cannot give them is said on stderr: the output is delivered either
/// way.
async fn keep_transcript(
    client: &ChainClient,
    store: &Arc<dyn ObjectStore>,
    key: &mcjs_client::Pubkey,
    local: &Path,
) -> (Option<String>, Option<String>) {
    let (text, rows) = match crate::cmd::job::transcript(client, store, key).await {
        Ok(found) => found,
        Err(e) => {
            eprintln!("the job's logs were not kept beside its output: {e:#}");
            return (None, None);
        }
    };
    let beside = |suffix: &str| {
        let mut name = local.as_os_str().to_os_string();
        name.push(suffix);
        PathBuf::from(name)
    };
    let write = |path: PathBuf, bytes: &[u8]| match std::fs::write(&path, bytes) {
        Ok(()) => Some(path.display().to_string()),
        Err(e) => {
            eprintln!("cannot write {}: {e}", path.display());
            None
        }
    };
    let logs = (!text.is_empty())
        .then(|| write(beside(".logs.txt"), text.as_bytes()))
        .flatten();
    let metrics = (!rows.is_empty())
        .then(|| {
            write(
                beside(".metrics.csv"),
                crate::cmd::job::metrics_csv(&rows).as_bytes(),
            )
        })
        .flatten();
    (logs, metrics)
}

fn tempdir_near(needed: bool) -> anyhow::Result<Option<tempfile::TempDir>> {
    if !needed {
        return Ok(None);
    }
    Ok(Some(
        tempfile::Builder::new()
            .prefix("mcjs-output-")
            .tempdir()
            .context("cannot create a scratch directory")?,
    ))
}

fn progress(global: &GlobalArgs) -> Option<indicatif::ProgressBar> {
    if !matches!(global.output, OutputFormat::Display) {
        return None;
    }
    let bar = indicatif::ProgressBar::new(0).with_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} downloading {bytes}/{total_bytes} ({bytes_per_sec}, {eta})",
        )
        .expect("valid template"),
    );
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    Some(bar)
}

/// Copies the verified files into the user's bucket with the user's own
/// credentials (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY here, on the
/// user's machine).
async fn deliver_to_s3(
    url: &StoreUrl,
    local: &Path,
    files: &[mcjs_runtime::checkpoint::FileDigest],
) -> anyhow::Result<()> {
    let StoreUrl::S3(location) = url else {
        unreachable!("only s3:// destinations are delivered")
    };
    let mut builder = object_store::aws::AmazonS3Builder::from_env()
        .with_bucket_name(&location.bucket)
        .with_region(&location.region)
        .with_virtual_hosted_style_request(!location.path_style);
    if let Some(endpoint) = &location.endpoint {
        builder = builder
            .with_endpoint(endpoint)
            .with_allow_http(endpoint.starts_with("http://"));
    }
    let bucket = builder
        .build()
        .map_err(|e| anyhow!("cannot open the destination {url}: {e}"))?;
    for f in files {
        let key = ObjectPath::from(location.key(&f.path));
        let bytes = tokio::fs::read(local.join(&f.path))
            .await
            .with_context(|| format!("cannot read the verified {}", f.path))?;
        bucket.put(&key, bytes.into()).await.with_context(|| {
            format!("cannot write {key} to {url} (with your AWS_* credentials)")
        })?;
    }
    Ok(())
}

#[derive(Serialize)]
pub(crate) struct Uploaded {
    pub uri: String,
    pub sha256: String,
    pub size: u64,
}

impl std::fmt::Display for Uploaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "uploaded {} bytes to {}", self.size, self.uri)?;
        write!(f, "sha256 {}", self.sha256)
    }
}

/// `mcjs job upload`: a data file into the wallet's own space of the store.
pub async fn upload(
    ctx: &Ctx,
    global: &GlobalArgs,
    file: &Path,
    name: Option<String>,
    store_args: &StoreArgs,
) -> anyhow::Result<u8> {
    let name = match name {
        Some(n) => n,
        None => file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| anyhow!("{} has no file name; pass --name", file.display()))?,
    };
    let uploaded = upload_file(ctx, file, name, store_args).await?;
    global.output.print(&uploaded)?;
    Ok(EXIT_OK)
}

/// Uploads `file` as `name` into the wallet's own space of the
/// deployment's S3 store: what `mcjs job upload` and `mcjs job run` do.
pub(crate) async fn upload_file(
    ctx: &Ctx,
    file: &Path,
    name: String,
    store_args: &StoreArgs,
) -> anyhow::Result<Uploaded> {
    use sha2::Digest;
    let wallet = ctx.wallet()?;
    let url = store_args.resolve(ctx).await?;
    let StoreUrl::S3(location) = &url else {
        bail!(
            "the deployment's store is a directory ({url}): declare the file with a file:// URI under one of the agents' --data-root directories instead"
        );
    };
    if name.is_empty()
        || name.contains('/')
        || name == "."
        || name == ".."
        || !name
            .bytes()
            .all(|b| b.is_ascii_graphic() && b != b'%' && b != b'\\')
    {
        bail!("--name {name:?}: use a plain file name (printable ASCII, no '/', '%' or '\\')");
    }
    let bytes = tokio::fs::read(file)
        .await
        .with_context(|| format!("cannot read {}", file.display()))?;
    let sha256 = hex::encode(sha2::Sha256::digest(&bytes));
    let size = bytes.len() as u64;
    let path = mcjs_protocol::store::layout::user_data(&wallet.pubkey().to_string(), &name);
    let store = crate::store::open(
        &url,
        &store_args.scheduler(ctx),
        crate::store::identity(Role::Owner, &wallet),
    )?;
    // Never half visible: one put, or a multipart upload aborted on failure.
    let mut upload = mcjs_runtime::store::ObjectUpload::new(store, ObjectPath::from(path.as_str()));
    let uploaded = match upload.put(bytes).await {
        Ok(()) => upload.finish().await,
        Err(e) => Err(e),
    };
    uploaded.with_context(|| format!("cannot upload {}", file.display()))?;
    Ok(Uploaded {
        uri: format!("s3://{}/{}", location.bucket, location.key(&path)),
        sha256,
        size,
    })
}
