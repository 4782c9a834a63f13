//! GPU model names as MCJS compares them.
//!
//! Kept local so the placement core has no dependency on the job specification crate; the
//! shared implementation replaces it once both are merged, and the rules must stay identical.

/// Normalises a GPU model name: lowercase, a leading "nvidia " then a leading "tesla "
/// stripped, runs of spaces and underscores collapsed to '-'.
pub fn normalise_model(raw: &str) -> String {
    let lower = raw.trim().to_lowercase();
    let rest = lower.strip_prefix("nvidia ").unwrap_or(&lower);
    let rest = rest.strip_prefix("tesla ").unwrap_or(rest);
    let mut out = String::with_capacity(rest.len());
    let mut in_separator = false;
    for ch in rest.chars() {
        if ch == ' ' || ch == '_' {
            if !in_separator {
                out.push('-');
            }
            in_separator = true;
        } else {
            out.push(ch);
            in_separator = false;
        }
    }
    out
}

/// Whether a node's normalised model is allowed by a normalised allow-list (empty = any).
///
/// An entry matches when equal to the model or when the model continues it after a '-',
/// so "a100" admits "a100-sxm4-80gb" while "a100-80gb" does not.
pub fn model_matches(allow_list: &[String], model: &str) -> bool {
    allow_list.is_empty() || allow_list.iter().any(|entry| entry_matches(entry, model))
}

fn entry_matches(entry: &str, model: &str) -> bool {
    match model.strip_prefix(entry) {
        Some("") => true,
        Some(rest) => rest.starts_with('-'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vendor_names_normalise_to_the_shared_form() {
        assert_eq!(normalise_model("NVIDIA A100-SXM4-80GB"), "a100-sxm4-80gb");
        assert_eq!(normalise_model("Tesla K80"), "k80");
        assert_eq!(
            normalise_model("NVIDIA GeForce RTX 4090"),
            "geforce-rtx-4090"
        );
        assert_eq!(normalise_model("Quadro_RTX  8000"), "quadro-rtx-8000");
    }

    #[test]
    fn allow_list_entries_match_whole_dash_separated_prefixes() {
        let list = |xs: &[&str]| xs.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(model_matches(&[], "k80"));
        assert!(model_matches(&list(&["a100"]), "a100-sxm4-80gb"));
        assert!(model_matches(&list(&["a100-sxm4-80gb"]), "a100-sxm4-80gb"));
        assert!(!model_matches(&list(&["a100-80gb"]), "a100-sxm4-80gb"));
        assert!(!model_matches(&list(&["a10"]), "a100-sxm4-80gb"));
        assert!(model_matches(&list(&["h100", "a100"]), "a100-pcie-40gb"));
    }
}
