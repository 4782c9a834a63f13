//! `mcjs job run`: from an image, a command and data files to a running job
//! in one command. It writes the spec from flags, checks it and everything
//! it can before any byte leaves the machine (the files, the image, a node
//! that fits, the bond, the wallet's funds), uploads the data into the
//! owner's space of the store, submits with the bond it shows, and follows
//! what the job prints until it ends.

use std::path::PathBuf;

use anyhow::{Context, anyhow, bail};
use mcjs::state::{JobState, NodeStatus};
use mcjs_client::{ChainClient, Signer, ix};
use mcjs_protocol::store::StoreUrl;
use mcjs_spec::JobSpec;
use serde_json::json;

use super::StoreArgs;
use crate::chain::{Ctx, now_unix, parse_usdc, require_funds, usdc};
use crate::{EXIT_FALSE, EXIT_OK, GlobalArgs};

#[derive(clap::Args, Debug)]
pub struct RunArgs {
    /// The job's image: by digest (`name@sha256:…`), or a name this
    /// machine's Docker engine knows, looked up to its id.
    #[arg(long)]
    pub image: String,
    /// A file the job reads, mounted read-only at /mcjs/data/<its name>:
    /// uploaded into your space of the store (repeat for more).
    #[arg(long = "data", value_name = "FILE")]
    pub data: Vec<PathBuf>,
    /// GPUs the job needs.
    #[arg(long, default_value_t = 1)]
    pub gpus: u8,
    /// A GPU model it may run on, e.g. a100-sxm4-80gb (repeat for more);
    /// default: any with enough memory.
    #[arg(long = "gpu-model", value_name = "MODEL")]
    pub gpu_models: Vec<String>,
    /// Memory per GPU, at least.
    #[arg(long, default_value = "8GiB")]
    pub min_vram: String,
    /// CPU cores.
    #[arg(long, default_value_t = 2)]
    pub cpus: u32,
    /// Memory.
    #[arg(long, default_value = "8GiB")]
    pub ram: String,
    /// Scratch disk (data, checkpoints and output together).
    #[arg(long, default_value = "20GiB")]
    pub disk: String,
    /// The longest it may run (until its command exits 0): 30m, 12h, 3d.
    #[arg(long, default_value = "1h")]
    pub duration: String,
    /// How often MCJS asks for a checkpoint (SIGUSR1, docs/job-contract.md).
    #[arg(long, default_value = "15m")]
    pub interval: String,
    /// The largest checkpoint it writes.
    #[arg(long, default_value = "1GiB")]
    pub checkpoint_size: String,
    /// The most you pay, USDC per GPU-hour.
    #[arg(long, default_value = "2.00")]
    pub max_price: String,
    /// A file the job must leave in /mcjs/output for its run to count as
    /// finished, e.g. model.pt (repeat for more; at least one).
    #[arg(long = "artifact", value_name = "PATH", required = true)]
    pub artifacts: Vec<String>,
    /// Your name for the model (default: the image's name).
    #[arg(long)]
    pub model_id: Option<String>,
    /// USDC to lock as the bond; default: the most the job can cost (its
    /// GPUs at the maximum price for the whole duration).
    #[arg(long, value_parser = parse_usdc)]
    pub bond: Option<u64>,
    /// Print the spec (on standard output: `mcjs spec validate` takes it)
    /// and the bond, check them, and stop: nothing is uploaded or locked.
    #[arg(long)]
    pub dry_run: bool,
    /// Once submitted, print the job's address and return instead of
    /// following what it prints.
    #[arg(long)]
    pub detach: bool,
    #[command(flatten)]
    pub store: StoreArgs,
    /// The command and its arguments, after `--`: `-- python3 train.py --epochs 3`.
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// A data file, read and hashed before anything else happens.
struct DataFile {
    path: PathBuf,
    name: String,
    sha256: String,
    size: u64,
}

pub(super) async fn run(
    ctx: &Ctx,
    client: &ChainClient,
    global: &GlobalArgs,
    args: RunArgs,
) -> anyhow::Result<u8> {
    let files = read_data(&args.data)?;
    let image = resolve_image(&args.image)?;
    let wallet = ctx.wallet()?;
    let owner = wallet.pubkey();

    // The spec with the data where it lies here: everything the chain will
    // hold the job to is checked on it before the store is even asked.
    let here: Vec<String> = files
        .iter()
        .map(|f| data_uri(None, &owner.to_string(), f))
        .collect::<anyhow::Result<_>>()?;
    let (_, spec) = make_spec(&args, &image, &files, &here)?;
    let submit = ix::submit_args(&spec, 0, 0);
    let minimum = mcjs::state::minimum_bond(&submit.requirements, &submit.terms)
        .map_err(|e| anyhow!("cannot compute the minimum bond: {e}"))?;
    let most = whole_cost(&submit.requirements, &submit.terms)?;
    let bond = match args.bond {
        Some(bond) if bond < minimum => bail!(
            "--bond {} USDC is too small: this job needs at least {} USDC (one checkpoint interval of {} GPU(s) at {} USDC an hour); nothing was uploaded or locked",
            usdc(bond),
            usdc(minimum),
            submit.requirements.gpu_count,
            usdc(submit.terms.max_price_per_gpu_hour)
        ),
        Some(bond) => bond,
        None => most.max(minimum),
    };
    require_a_fitting_node(client, &submit).await?;
    let explain = format!(
        "bond: {} USDC ({} GPU(s) at up to {} USDC an hour for {}; at least {} USDC); what the job does not use comes back",
        usdc(bond),
        submit.requirements.gpu_count,
        usdc(submit.terms.max_price_per_gpu_hour),
        args.duration,
        usdc(minimum)
    );

    // Where the data will be: the store's, once it is asked (a dry run that
    // cannot ask keeps the paths here).
    let store = if files.is_empty() {
        None
    } else {
        match args.store.resolve(ctx).await {
            Ok(url) => Some(url),
            Err(e) if args.dry_run => {
                eprintln!(
                    "note: the store is not known ({e:#}): the data's uris are this machine's paths; a real run uploads the files and names them in the store"
                );
                None
            }
            Err(e) => {
                return Err(e.context(
                    "cannot find the store to upload the data to; nothing was uploaded or locked",
                ));
            }
        }
    };
    let uris: Vec<String> = files
        .iter()
        .map(|f| data_uri(store.as_ref(), &owner.to_string(), f))
        .collect::<anyhow::Result<_>>()?;
    let (text, _) = make_spec(&args, &image, &files, &uris)?;
    if args.dry_run {
        println!("{text}");
        eprintln!("{explain}; --dry-run: nothing was uploaded or locked");
        return Ok(EXIT_OK);
    }

    let deployment = client.deployment().await?;
    let owner_token = ix::usdc_account(&owner, &deployment.usdc_mint);
    require_funds(client, &wallet, &owner_token, bond)
        .await
        .context("nothing was uploaded or locked")?;
    eprintln!("{explain}");
    for f in &files {
        if matches!(store, Some(StoreUrl::S3(_))) {
            eprintln!("uploading {} ({} bytes)", f.path.display(), f.size);
            let up = crate::cmd::job_output::upload_file(ctx, &f.path, f.name.clone(), &args.store)
                .await
                .context("the job was not submitted and no USDC moved")?;
            if up.sha256 != f.sha256 {
                bail!(
                    "{} changed while it was uploaded (sha256 {} then {}); the job was not submitted and no USDC moved",
                    f.path.display(),
                    f.sha256,
                    up.sha256
                );
            }
        }
    }
    let dir = tempfile::tempdir().context("cannot make a temporary directory")?;
    let spec_path = dir.path().join("job.json");
    std::fs::write(&spec_path, &text)
        .with_context(|| format!("cannot write {}", spec_path.display()))?;
    let job = super::submit::submit_job(
        ctx,
        client,
        global,
        spec_path,
        bond,
        None,
        Some(args.store.clone()),
    )
    .await?;
    if args.detach {
        return Ok(EXIT_OK);
    }
    eprintln!("following what it prints (Ctrl-C stops following, not the job):");
    super::logs::run(
        ctx,
        client,
        global,
        job,
        true,
        super::logs::Filter::default(),
        &args.store,
    )
    .await?;
    // Exit 0 when it completed, 1 when it ended otherwise, as `mcjs job watch`.
    let state = client.job(&job).await?.map(|j| j.state);
    match state {
        Some(JobState::Completed { .. }) => {
            eprintln!("job {job} completed; its output: mcjs job output {job}");
            Ok(EXIT_OK)
        }
        Some(state) => {
            eprintln!(
                "job {job} ended {}: mcjs job status {job} says why; mcjs job output {job} --partial fetches its last checkpoint",
                state.name()
            );
            Ok(EXIT_FALSE)
        }
        None => {
            eprintln!("job {job} is closed");
            Ok(EXIT_FALSE)
        }
    }
}

/// The spec the flags say with the data at `uris`, as text and validated.
fn make_spec(
    args: &RunArgs,
    image: &str,
    files: &[DataFile],
    uris: &[String],
) -> anyhow::Result<(String, JobSpec)> {
    let text = serde_json::to_string_pretty(&spec_value(args, image, files, uris))?;
    let spec = JobSpec::from_json_validated(&text, now_unix()).map_err(|errors| {
        let list: Vec<String> = errors.iter().map(|e| format!("  {e}")).collect();
        anyhow!(
            "these flags make no valid job spec ({} errors); nothing was uploaded or locked:\n{}",
            errors.len(),
            list.join("\n")
        )
    })?;
    Ok((text, spec))
}

/// Each `--data` file, read whole and hashed: a file that is missing or
/// unreadable, or two of one name, stop everything before it starts.
fn read_data(paths: &[PathBuf]) -> anyhow::Result<Vec<DataFile>> {
    use sha2::Digest;
    let mut files: Vec<DataFile> = Vec::new();
    for path in paths {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| {
                anyhow!(
                    "--data {}: not a file name; nothing was uploaded or locked",
                    path.display()
                )
            })?;
        if files.iter().any(|f| f.name == name) {
            bail!(
                "--data {}: a second file named {name}; each is mounted by its name, so rename one (nothing was uploaded or locked)",
                path.display()
            );
        }
        let mut file = std::fs::File::open(path).with_context(|| {
            format!(
                "--data {}: cannot read it; nothing was uploaded or locked",
                path.display()
            )
        })?;
        let mut hasher = sha2::Sha256::new();
        let size = std::io::copy(&mut file, &mut hasher).with_context(|| {
            format!(
                "--data {}: cannot read it; nothing was uploaded or locked",
                path.display()
            )
        })?;
        files.push(DataFile {
            path: path.clone(),
            name,
            sha256: hex::encode(hasher.finalize()),
            size,
        });
    }
    Ok(files)
}

/// The image by digest: as given when it names one, else this machine's
/// Docker engine's id for the name.
fn resolve_image(image: &str) -> anyhow::Result<String> {
    if image.contains("@sha256:") {
        return Ok(image.to_string());
    }
    let out = std::process::Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", image])
        .output();
    let id = match out {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_string(),
        Ok(out) => bail!(
            "--image {image}: not an image this machine's Docker engine has ({}); build or pull it, or give it by digest (name@sha256:...); nothing was uploaded or locked",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => bail!(
            "--image {image}: cannot ask Docker for its id ({e}); give the image by digest (name@sha256:...); nothing was uploaded or locked"
        ),
    };
    let name = image.split([':', '@']).next().unwrap_or(image);
    let digest = id.strip_prefix("sha256:").unwrap_or(&id);
    Ok(format!("{name}@sha256:{digest}"))
}

/// Where a data file will be: its object in the owner's space of an S3
/// store, else (a directory store, or a dry run with no store known) its
/// path on this machine.
fn data_uri(store: Option<&StoreUrl>, owner: &str, f: &DataFile) -> anyhow::Result<String> {
    if let Some(StoreUrl::S3(location)) = store {
        let path = mcjs_protocol::store::layout::user_data(owner, &f.name);
        return Ok(format!("s3://{}/{}", location.bucket, location.key(&path)));
    }
    let absolute = std::path::absolute(&f.path)
        .with_context(|| format!("--data {}: cannot make its path absolute", f.path.display()))?;
    Ok(format!("file://{}", absolute.display()))
}

/// The job spec the flags say.
fn spec_value(
    args: &RunArgs,
    image: &str,
    files: &[DataFile],
    uris: &[String],
) -> serde_json::Value {
    let model_id = args.model_id.clone().unwrap_or_else(|| {
        let name = image.split('@').next().unwrap_or(image);
        name.rsplit('/').next().unwrap_or(name).to_string()
    });
    let (command, rest) = args
        .command
        .split_first()
        .map(|(c, r)| (c.clone(), r.to_vec()))
        .unwrap_or_default();
    let data: Vec<serde_json::Value> = files
        .iter()
        .zip(uris)
        .map(|(f, uri)| {
            json!({
                "name": f.name,
                "role": "dataset",
                "uri": uri,
                "sha256": f.sha256,
                "size": format!("{}B", f.size),
            })
        })
        .collect();
    let mut hardware = json!({
        "gpu_count": args.gpus,
        "min_vram_per_gpu": args.min_vram,
        "cpu_cores": args.cpus,
        "ram": args.ram,
        "disk": args.disk,
    });
    if !args.gpu_models.is_empty() {
        hardware["gpu_models"] = json!(args.gpu_models);
    }
    let destination = std::env::current_dir()
        .map(|d| format!("file://{}", d.join("mcjs-output").display()))
        .unwrap_or_else(|_| "file:///tmp/mcjs-output".to_string());
    let output = json!({
        "produces": ["model"],
        "destination": destination,
        "return_partial": true,
        "required_artifacts": args.artifacts,
    });
    json!({
        "version": 1,
        "work": {
            "kind": "training",
            "model_id": model_id,
            "image": image,
            "command": [command],
            "args": rest,
            "queue_tolerant": true,
        },
        "data": data,
        "request": {
            "hardware": hardware,
            "duration": {"mode": "until_done", "limit": args.duration},
            "max_price_per_gpu_hour": args.max_price,
        },
        "output": output,
        "checkpoint": {
            "interval": args.interval,
            "max_size": args.checkpoint_size,
            "restart_budget": 3,
        },
    })
}

/// The most a job can cost: its GPUs at its maximum price for its whole
/// duration.
fn whole_cost(
    req: &mcjs::state::JobRequirements,
    terms: &mcjs::state::JobTerms,
) -> anyhow::Result<u64> {
    let rate = terms
        .max_price_per_gpu_hour
        .checked_mul(u64::from(req.gpu_count))
        .ok_or_else(|| anyhow!("the job's hourly price overflows"))?;
    mcjs::state::cost_of(rate, u64::from(terms.max_duration_secs))
        .map_err(|e| anyhow!("cannot compute the job's cost: {e}"))
}

/// A node registered on this chain that could take the job: not offline,
/// its hardware fitting the request, its price within the maximum. Without
/// one the job would only wait in the queue, its bond locked.
async fn require_a_fitting_node(
    client: &ChainClient,
    submit: &mcjs::instructions::SubmitJobArgs,
) -> anyhow::Result<()> {
    let nodes = client.nodes().await?;
    let fits = nodes.iter().any(|(_, n)| {
        n.status != NodeStatus::Offline
            && submit.requirements.check(&n.hardware).is_ok()
            && n.price_per_gpu_hour <= submit.terms.max_price_per_gpu_hour
    });
    if fits {
        return Ok(());
    }
    let mut offered: Vec<String> = nodes
        .iter()
        .filter(|(_, n)| n.status != NodeStatus::Offline)
        .map(|(_, n)| {
            format!(
                "{}× {} ({} MiB) at {} USDC",
                n.hardware.gpu_count,
                n.hardware.gpu_model,
                n.hardware.vram_per_gpu_mib,
                usdc(n.price_per_gpu_hour)
            )
        })
        .collect();
    offered.sort();
    offered.dedup();
    let offered = if offered.is_empty() {
        "none is online".to_string()
    } else {
        format!("online: {}", offered.join("; "))
    };
    bail!(
        "no node on this chain can run the job ({offered}): ask for fewer GPUs, less GPU memory, other --gpu-model values or a higher --max-price; nothing was uploaded or locked"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_image_by_digest_is_taken_as_it_is() {
        let image = format!("ghcr.io/lab/train@sha256:{}", "ab".repeat(32));
        assert_eq!(resolve_image(&image).unwrap(), image);
    }

    #[test]
    fn the_data_is_in_the_owners_space_of_an_s3_store_else_where_it_lies() {
        let f = DataFile {
            path: PathBuf::from("/data/train.csv"),
            name: "train.csv".into(),
            sha256: String::new(),
            size: 0,
        };
        let s3: StoreUrl = "s3://bucket/deploy".parse().unwrap();
        assert_eq!(
            data_uri(Some(&s3), "Owner1", &f).unwrap(),
            format!(
                "s3://bucket/deploy/{}",
                mcjs_protocol::store::layout::user_data("Owner1", "train.csv")
            )
        );
        assert_eq!(
            data_uri(None, "Owner1", &f).unwrap(),
            "file:///data/train.csv"
        );
    }
}
