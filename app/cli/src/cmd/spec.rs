//! `mcjs spec`: check job specifications, hash them, print their schema.

use std::fmt;
use std::path::PathBuf;

use anyhow::Context;
use mcjs_spec::{JobSpec, SpecError, canonical_json, spec_hash};
use serde::Serialize;

use crate::{EXIT_ERROR, EXIT_FALSE, EXIT_OK, GlobalArgs};

#[derive(clap::Subcommand, Debug)]
pub enum SpecCommand {
    /// Check job spec files; lists every error of each file.
    Validate {
        /// Spec files (JSON).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Check deadlines against this time (RFC 3339) instead of the clock.
        #[arg(long, value_name = "RFC3339")]
        now: Option<String>,
    },
    /// Print the sha256 of a spec's canonical form (RFC 8785): the hash the chain records.
    Hash {
        file: PathBuf,
        /// Also print the canonical form that is hashed.
        #[arg(long)]
        canonical: bool,
    },
    /// Print the JSON Schema of job specs (v1).
    Schema,
    /// Write a starting spec, commented, for the work, the data, the
    /// request, the output and the checkpoint policy; edit it, then
    /// `mcjs spec validate` and `mcjs job submit` it.
    Init {
        /// Where to write it (`-`: standard output).
        #[arg(default_value = "job.json")]
        file: PathBuf,
        /// Replace the file if it exists.
        #[arg(long)]
        force: bool,
    },
}

/// The starting spec `mcjs spec init` writes: valid as it is, every value a
/// placeholder its comment explains.
pub const STARTING_SPEC: &str = include_str!("spec_init.jsonc");

pub fn run(cmd: SpecCommand, global: &GlobalArgs) -> anyhow::Result<u8> {
    match cmd {
        SpecCommand::Validate { files, now } => {
            let now = match now {
                Some(text) => text
                    .parse::<mcjs_spec::fields::Timestamp>()
                    .map_err(|e| anyhow::anyhow!("--now: {e}"))?
                    .unix(),
                None => std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .context("the system clock is before 1970")?
                    .as_secs() as i64,
            };
            let report = ValidateReport {
                files: files.iter().map(|f| check_file(f, now)).collect(),
            };
            global.output.print(&report)?;
            Ok(report.exit_code())
        }
        SpecCommand::Hash { file, canonical } => {
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            match JobSpec::from_json(&text) {
                Ok(spec) => {
                    let report = HashReport {
                        file: file.display().to_string(),
                        sha256: hex::encode(spec_hash(&spec)),
                        canonical: canonical.then(|| canonical_json(&spec)),
                    };
                    global.output.print(&report)?;
                    Ok(EXIT_OK)
                }
                Err(errors) => {
                    let report = ValidateReport {
                        files: vec![FileReport::invalid(&file, errors.0)],
                    };
                    global.output.print(&report)?;
                    Ok(EXIT_FALSE)
                }
            }
        }
        SpecCommand::Init { file, force } => init(&file, force, global),
        SpecCommand::Schema => {
            global
                .output
                .print(&SchemaOutput(mcjs_spec::json_schema()))?;
            Ok(EXIT_OK)
        }
    }
}

fn init(file: &std::path::Path, force: bool, global: &GlobalArgs) -> anyhow::Result<u8> {
    if file == std::path::Path::new("-") {
        print!("{STARTING_SPEC}");
        return Ok(EXIT_OK);
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true);
    if force {
        options.create(true).truncate(true);
    } else {
        options.create_new(true);
    }
    let mut out = match options.open(file) {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => anyhow::bail!(
            "{} exists; nothing was written (pass --force to replace it, or name another file)",
            file.display()
        ),
        Err(e) => return Err(e).with_context(|| format!("cannot write {}", file.display())),
    };
    std::io::Write::write_all(&mut out, STARTING_SPEC.as_bytes())
        .with_context(|| format!("cannot write {}", file.display()))?;
    global.output.print(&Initialised {
        file: file.display().to_string(),
    })?;
    Ok(EXIT_OK)
}

#[derive(Serialize)]
struct Initialised {
    file: String,
}

impl fmt::Display for Initialised {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "wrote {}: a starting spec, every value a placeholder its comment explains",
            self.file
        )?;
        writeln!(f, "  edit it, then: mcjs spec validate {}", self.file)?;
        write!(
            f,
            "  and submit it: mcjs job submit {} --bond USDC",
            self.file
        )
    }
}

fn check_file(file: &PathBuf, now: i64) -> FileReport {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) => {
            return FileReport {
                file: file.display().to_string(),
                status: FileStatus::Unreadable,
                sha256: None,
                errors: vec![],
                read_error: Some(e.to_string()),
            };
        }
    };
    match JobSpec::from_json_validated(&text, now) {
        Ok(spec) => FileReport {
            file: file.display().to_string(),
            status: FileStatus::Valid,
            sha256: Some(hex::encode(spec_hash(&spec))),
            errors: vec![],
            read_error: None,
        },
        Err(errors) => FileReport::invalid(file, errors.0),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FileStatus {
    Valid,
    Invalid,
    Unreadable,
}

#[derive(Debug, Serialize)]
pub struct FileReport {
    pub file: String,
    pub status: FileStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    pub errors: Vec<SpecError>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub read_error: Option<String>,
}

impl FileReport {
    fn invalid(file: &std::path::Path, errors: Vec<SpecError>) -> Self {
        FileReport {
            file: file.display().to_string(),
            status: FileStatus::Invalid,
            sha256: None,
            errors,
            read_error: None,
        }
    }
}

#[derive(Debug, Serialize)]
pub struct ValidateReport {
    pub files: Vec<FileReport>,
}

impl ValidateReport {
    /// 2 when a file could not be read, else 1 when a spec is invalid, else 0.
    fn exit_code(&self) -> u8 {
        if self
            .files
            .iter()
            .any(|f| f.status == FileStatus::Unreadable)
        {
            EXIT_ERROR
        } else if self.files.iter().any(|f| f.status == FileStatus::Invalid) {
            EXIT_FALSE
        } else {
            EXIT_OK
        }
    }
}

impl fmt::Display for ValidateReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, report) in self.files.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            match report.status {
                FileStatus::Valid => write!(
                    f,
                    "{}: valid (sha256 {})",
                    report.file,
                    report.sha256.as_deref().unwrap_or("")
                )?,
                FileStatus::Unreadable => write!(
                    f,
                    "{}: unreadable: {}",
                    report.file,
                    report.read_error.as_deref().unwrap_or("")
                )?,
                FileStatus::Invalid => {
                    let n = report.errors.len();
                    write!(
                        f,
                        "{}: invalid, {n} error{}",
                        report.file,
                        if n == 1 { "" } else { "s" }
                    )?;
                    for e in &report.errors {
                        write!(f, "\n  {e}")?;
                    }
                }
            }
        }
        Ok(())
    }
}

#[derive(Debug, Serialize)]
pub struct HashReport {
    pub file: String,
    pub sha256: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub canonical: Option<String>,
}

impl fmt::Display for HashReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.sha256)?;
        if let Some(canonical) = &self.canonical {
            write!(f, "\n{canonical}")?;
        }
        Ok(())
    }
}

/// The schema prints as itself in every format.
#[derive(Debug, Serialize)]
#[serde(transparent)]
pub struct SchemaOutput(serde_json::Value);

impl fmt::Display for SchemaOutput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = serde_json::to_string_pretty(&self.0).map_err(|_| fmt::Error)?;
        f.write_str(&text)
    }
}
