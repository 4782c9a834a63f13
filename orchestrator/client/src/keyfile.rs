//! Solana CLI keypair files: a JSON array of the 64 secret and public bytes.

use std::path::{Path, PathBuf};

use solana_keypair::Keypair;

#[derive(Debug, thiserror::Error)]
pub enum KeyfileError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not a keypair file (a JSON array of 64 bytes): {message}")]
    Keypair { path: PathBuf, message: String },
}

/// Reads a Solana CLI keypair file.
pub fn read_keypair(path: &Path) -> Result<Keypair, KeyfileError> {
    let text = std::fs::read_to_string(path).map_err(|source| KeyfileError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let not_a_keypair = |message: String| KeyfileError::Keypair {
        path: path.to_path_buf(),
        message,
    };
    let bytes: Vec<u8> = serde_json::from_str(&text).map_err(|e| not_a_keypair(e.to_string()))?;
    Keypair::try_from(bytes.as_slice()).map_err(|e| not_a_keypair(e.to_string()))
}

/// Writes a Solana CLI keypair file, readable by its owner only.
pub fn write_keypair(path: &Path, keypair: &Keypair) -> Result<(), KeyfileError> {
    let write_err = |source| KeyfileError::Write {
        path: path.to_path_buf(),
        source,
    };
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(write_err)?;
    }
    let json = serde_json::to_string(&keypair.to_bytes().to_vec()).expect("bytes serialise");
    std::fs::write(path, json).map_err(write_err)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(write_err)?;
    }
    Ok(())
}
