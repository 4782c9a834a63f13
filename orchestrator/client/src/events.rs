//! Parsing the program's events out of transaction logs.

use anchor_lang::{AnchorDeserialize, Discriminator, Event};
use base64::Engine;

const DATA_PREFIX: &str = "Program data: ";

/// The decoded payloads of every `Program data:` line, in order.
pub fn data_lines(logs: &[String]) -> Vec<Vec<u8>> {
    logs.iter()
        .filter_map(|line| line.strip_prefix(DATA_PREFIX))
        .filter_map(|b64| {
            // A line may carry several space-separated fields; events use one.
            let first = b64.split(' ').next()?;
            base64::engine::general_purpose::STANDARD.decode(first).ok()
        })
        .collect()
}

/// Every event of type `E` in the logs, in order.
pub fn of_type<E: Event + AnchorDeserialize + Discriminator>(logs: &[String]) -> Vec<E> {
    data_lines(logs)
        .into_iter()
        .filter_map(|data| {
            let body = data.strip_prefix(E::DISCRIMINATOR)?;
            E::deserialize(&mut &body[..]).ok()
        })
        .collect()
}
