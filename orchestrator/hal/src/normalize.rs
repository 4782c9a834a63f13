//! Turning vendor and OS strings into stable identity fields.

/// Normalised GPU model name, by the project-wide convention of `mcjs_spec::gpu`.
pub fn gpu_model(raw: &str) -> String {
    mcjs_spec::gpu::normalize_model(raw)
}

/// Lowercase words joined by single '-', whatever mix of spaces, underscores or dashes
/// separated them.
fn collapse_separators(s: &str) -> String {
    s.split(|c: char| c.is_whitespace() || c == '_' || c == '-')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join("-")
}

/// Normalised CPU model: trademarks, the words "cpu"/"processor" and a clock suffix removed.
///
/// `Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz` and `Intel Xeon Gold 6248` both give
/// `intel-xeon-gold-6248`; `AMD EPYC 7763 64-Core Processor` gives `amd-epyc-7763-64-core`.
pub fn cpu_model(raw: &str) -> String {
    let lower = raw.to_lowercase();
    let before_clock = lower.split('@').next().unwrap_or_default();
    let mut cleaned = before_clock.to_string();
    for mark in ["(r)", "(tm)", "(c)", "®", "™"] {
        cleaned = cleaned.replace(mark, " ");
    }
    let words: Vec<&str> = cleaned
        .split(|c: char| c.is_whitespace() || c == '_' || c == ',')
        .filter(|w| !w.is_empty() && !matches!(*w, "cpu" | "processor"))
        .collect();
    collapse_separators(&words.join(" "))
}

/// Canonical PCI address `dddd:bb:dd.f`, lowercase; NVML's 8-digit domain is shortened.
///
/// Returns the trimmed, lowercased input when it is not a PCI address.
pub fn pci_bus_id(raw: &str) -> String {
    let lower = raw.trim().to_ascii_lowercase();
    let parts: Vec<&str> = lower.split(':').collect();
    let (domain, bus, devfn) = match parts.as_slice() {
        [domain, bus, devfn] => (*domain, *bus, *devfn),
        [bus, devfn] => ("0", *bus, *devfn),
        _ => return lower,
    };
    let Some((dev, func)) = devfn.split_once('.') else {
        return lower;
    };
    let parse = |s: &str| u32::from_str_radix(s, 16).ok();
    match (parse(domain), parse(bus), parse(dev), parse(func)) {
        (Some(d), Some(b), Some(v), Some(fun)) if d <= 0xffff => {
            format!("{d:04x}:{b:02x}:{v:02x}.{fun:x}")
        }
        _ => lower,
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary.
pub fn truncate_utf8(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_names_follow_the_shared_convention() {
        assert_eq!(gpu_model("NVIDIA A100-SXM4-80GB"), "a100-sxm4-80gb");
        assert_eq!(gpu_model("Tesla K80"), "k80");
        assert_eq!(gpu_model("NVIDIA Tesla V100-SXM2-16GB"), "v100-sxm2-16gb");
        assert_eq!(gpu_model("NVIDIA GeForce RTX 4090"), "geforce-rtx-4090");
        assert_eq!(gpu_model("  nvidia   a100_sxm4__80gb "), "a100-sxm4-80gb");
    }

    #[test]
    fn cpu_names_lose_trademarks_and_clock() {
        assert_eq!(
            cpu_model("Intel(R) Xeon(R) Gold 6248 CPU @ 2.50GHz"),
            "intel-xeon-gold-6248"
        );
        assert_eq!(cpu_model("Intel Xeon Gold 6248"), "intel-xeon-gold-6248");
        assert_eq!(
            cpu_model("AMD EPYC 7763 64-Core Processor"),
            "amd-epyc-7763-64-core"
        );
    }

    #[test]
    fn pci_ids_are_canonical() {
        assert_eq!(pci_bus_id("00000000:07:00.0"), "0000:07:00.0");
        assert_eq!(pci_bus_id("0000:07:00.0"), "0000:07:00.0");
        assert_eq!(pci_bus_id("07:00.0"), "0000:07:00.0");
        assert_eq!(pci_bus_id("0000:AF:00.1"), "0000:af:00.1");
        assert_eq!(pci_bus_id("not-a-bus"), "not-a-bus");
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        assert_eq!(truncate_utf8("abc", 32), "abc");
        assert_eq!(truncate_utf8("ééé", 3), "é");
        assert_eq!(truncate_utf8(&"x".repeat(40), 32).len(), 32);
    }
}
