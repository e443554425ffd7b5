//! The EC2 instance types Floe can deploy Elasticsearch nodes on.
//!
//! The catalog is built in rather than fetched from the EC2 API so that
//! validating a request never needs AWS credentials or a network call; adding
//! a family is a change to the table below.

use std::fmt;

use Arch::{Arm64, X86_64};

/// CPU architecture of an instance type, which decides the AMI and the
/// Elasticsearch distribution to install.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Arch {
    Arm64,
    X86_64,
}

impl Arch {
    pub fn as_str(self) -> &'static str {
        match self {
            Arch::Arm64 => "arm64",
            Arch::X86_64 => "x86_64",
        }
    }

    /// Accepts the canonical names and the aliases used by Linux, Docker and
    /// Go (`aarch64`, `amd64`, `x86`), so values copied from other tools work.
    pub fn parse(s: &str) -> Option<Arch> {
        match s {
            "arm64" | "aarch64" => Some(Arch::Arm64),
            "x86_64" | "amd64" | "x86" => Some(Arch::X86_64),
            _ => None,
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstanceType {
    pub name: &'static str,
    pub family: &'static str,
    pub arch: Arch,
    pub vcpus: u32,
    pub memory_mib: u32,
    /// Instance-store NVMe capacity in GB as AWS advertises it, for families
    /// that have one.
    pub local_nvme_gb: Option<u32>,
}

/// Above about 32 GiB the JVM can no longer use compressed object pointers, so
/// a bigger heap holds fewer objects; Elastic recommends staying below it.
pub const MAX_HEAP_MIB: u32 = 31 * 1024;

/// Elasticsearch wants half the RAM for the heap and leaves the rest to the
/// filesystem cache, which Lucene relies on.
pub fn jvm_heap_mib(memory_mib: u32) -> u32 {
    (memory_mib / 2).min(MAX_HEAP_MIB)
}

/// Names are matched exactly: EC2 itself only knows lower-case names.
pub fn lookup(name: &str) -> Option<&'static InstanceType> {
    CATALOG.iter().find(|t| t.name == name)
}

/// Every known instance type, sorted by family and then by vCPU count.
pub fn all() -> &'static [InstanceType] {
    CATALOG
}

/// A known instance type close to `name`, for a "did you mean" hint.
///
/// In a known family the size with the nearest vCPU count wins (so
/// `c5.8xlarge`, which does not exist, suggests `c5.9xlarge`); otherwise the
/// name with the fewest typos, if it is within two edits.
pub fn suggest(name: &str) -> Option<&'static str> {
    let wanted = name.trim().to_ascii_lowercase();
    // The longest real name is 14 characters; refusing long input keeps the
    // edit-distance search cheap whatever a client sends.
    if wanted.is_empty() || wanted.len() > 32 {
        return None;
    }
    if let Some(found) = lookup(&wanted) {
        return Some(found.name);
    }
    let (family, size) = wanted.split_once('.').unwrap_or((wanted.as_str(), ""));
    let members: Vec<&'static InstanceType> =
        CATALOG.iter().filter(|t| t.family == family).collect();
    if !members.is_empty() {
        let best = match size_vcpus(size) {
            Some(vcpus) => members.iter().min_by_key(|t| t.vcpus.abs_diff(vcpus)),
            None => members
                .iter()
                .min_by_key(|t| edit_distance(size, size_of(t.name))),
        };
        return best.map(|t| t.name);
    }
    CATALOG
        .iter()
        .map(|t| (edit_distance(&wanted, t.name), t.name))
        .filter(|(distance, _)| *distance <= 2)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name)
}

fn size_of(name: &str) -> &str {
    name.split_once('.').map_or("", |(_, size)| size)
}

/// vCPUs implied by an EC2 size name; sizes follow a fixed scheme where
/// `Nxlarge` has 4N vCPUs.
fn size_vcpus(size: &str) -> Option<u32> {
    match size {
        "medium" => Some(1),
        "large" => Some(2),
        "xlarge" => Some(4),
        _ => {
            let multiple = size.strip_suffix("xlarge")?;
            if multiple.is_empty() || !multiple.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            multiple.parse::<u32>().ok()?.checked_mul(4)
        }
    }
}

/// Levenshtein distance, on characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut previous: Vec<usize> = (0..=b.len()).collect();
    let mut current = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        current[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous[j] + usize::from(ca != *cb);
            current[j + 1] = substitution.min(previous[j + 1] + 1).min(current[j] + 1);
        }
        std::mem::swap(&mut previous, &mut current);
    }
    previous[b.len()]
}

const fn gib(n: u32) -> u32 {
    n * 1024
}

const fn it(
    name: &'static str,
    family: &'static str,
    arch: Arch,
    vcpus: u32,
    memory_mib: u32,
    local_nvme_gb: Option<u32>,
) -> InstanceType {
    InstanceType {
        name,
        family,
        arch,
        vcpus,
        memory_mib,
        local_nvme_gb,
    }
}

// Figures are AWS's published ones. Memory is in MiB because i3 sizes are not
// whole GiB (15.25 GiB per 2 vCPUs). Keep the table sorted: `all()` promises it.
static CATALOG: &[InstanceType] = &[
    it("c5.large", "c5", X86_64, 2, gib(4), None),
    it("c5.xlarge", "c5", X86_64, 4, gib(8), None),
    it("c5.2xlarge", "c5", X86_64, 8, gib(16), None),
    it("c5.4xlarge", "c5", X86_64, 16, gib(32), None),
    it("c5.9xlarge", "c5", X86_64, 36, gib(72), None),
    it("c5.12xlarge", "c5", X86_64, 48, gib(96), None),
    it("c6g.large", "c6g", Arm64, 2, gib(4), None),
    it("c6g.xlarge", "c6g", Arm64, 4, gib(8), None),
    it("c6g.2xlarge", "c6g", Arm64, 8, gib(16), None),
    it("c6g.4xlarge", "c6g", Arm64, 16, gib(32), None),
    it("c6g.8xlarge", "c6g", Arm64, 32, gib(64), None),
    it("c6g.12xlarge", "c6g", Arm64, 48, gib(96), None),
    it("c6g.16xlarge", "c6g", Arm64, 64, gib(128), None),
    it("c6i.large", "c6i", X86_64, 2, gib(4), None),
    it("c6i.xlarge", "c6i", X86_64, 4, gib(8), None),
    it("c6i.2xlarge", "c6i", X86_64, 8, gib(16), None),
    it("c6i.4xlarge", "c6i", X86_64, 16, gib(32), None),
    it("c6i.8xlarge", "c6i", X86_64, 32, gib(64), None),
    it("c6i.12xlarge", "c6i", X86_64, 48, gib(96), None),
    it("c6i.16xlarge", "c6i", X86_64, 64, gib(128), None),
    it("c7g.large", "c7g", Arm64, 2, gib(4), None),
    it("c7g.xlarge", "c7g", Arm64, 4, gib(8), None),
    it("c7g.2xlarge", "c7g", Arm64, 8, gib(16), None),
    it("c7g.4xlarge", "c7g", Arm64, 16, gib(32), None),
    it("c7g.8xlarge", "c7g", Arm64, 32, gib(64), None),
    it("c7g.12xlarge", "c7g", Arm64, 48, gib(96), None),
    it("c7g.16xlarge", "c7g", Arm64, 64, gib(128), None),
    it("c7i.large", "c7i", X86_64, 2, gib(4), None),
    it("c7i.xlarge", "c7i", X86_64, 4, gib(8), None),
    it("c7i.2xlarge", "c7i", X86_64, 8, gib(16), None),
    it("c7i.4xlarge", "c7i", X86_64, 16, gib(32), None),
    it("c7i.8xlarge", "c7i", X86_64, 32, gib(64), None),
    it("c7i.12xlarge", "c7i", X86_64, 48, gib(96), None),
    it("c7i.16xlarge", "c7i", X86_64, 64, gib(128), None),
    it("i3.large", "i3", X86_64, 2, 15_616, Some(475)),
    it("i3.xlarge", "i3", X86_64, 4, 31_232, Some(950)),
    it("i3.2xlarge", "i3", X86_64, 8, 62_464, Some(1900)),
    it("i3.4xlarge", "i3", X86_64, 16, 124_928, Some(3800)),
    it("i3.8xlarge", "i3", X86_64, 32, 249_856, Some(7600)),
    it("i3.16xlarge", "i3", X86_64, 64, 499_712, Some(15200)),
    it("i4g.large", "i4g", Arm64, 2, gib(16), Some(468)),
    it("i4g.xlarge", "i4g", Arm64, 4, gib(32), Some(937)),
    it("i4g.2xlarge", "i4g", Arm64, 8, gib(64), Some(1875)),
    it("i4g.4xlarge", "i4g", Arm64, 16, gib(128), Some(3750)),
    it("i4g.8xlarge", "i4g", Arm64, 32, gib(256), Some(7500)),
    it("i4g.16xlarge", "i4g", Arm64, 64, gib(512), Some(15000)),
    it("i4i.large", "i4i", X86_64, 2, gib(16), Some(468)),
    it("i4i.xlarge", "i4i", X86_64, 4, gib(32), Some(937)),
    it("i4i.2xlarge", "i4i", X86_64, 8, gib(64), Some(1875)),
    it("i4i.4xlarge", "i4i", X86_64, 16, gib(128), Some(3750)),
    it("i4i.8xlarge", "i4i", X86_64, 32, gib(256), Some(7500)),
    it("i4i.12xlarge", "i4i", X86_64, 48, gib(384), Some(11250)),
    it("i4i.16xlarge", "i4i", X86_64, 64, gib(512), Some(15000)),
    it("im4gn.large", "im4gn", Arm64, 2, gib(8), Some(937)),
    it("im4gn.xlarge", "im4gn", Arm64, 4, gib(16), Some(1875)),
    it("im4gn.2xlarge", "im4gn", Arm64, 8, gib(32), Some(3750)),
    it("im4gn.4xlarge", "im4gn", Arm64, 16, gib(64), Some(7500)),
    it("im4gn.8xlarge", "im4gn", Arm64, 32, gib(128), Some(15000)),
    it("im4gn.16xlarge", "im4gn", Arm64, 64, gib(256), Some(30000)),
    it("m5.large", "m5", X86_64, 2, gib(8), None),
    it("m5.xlarge", "m5", X86_64, 4, gib(16), None),
    it("m5.2xlarge", "m5", X86_64, 8, gib(32), None),
    it("m5.4xlarge", "m5", X86_64, 16, gib(64), None),
    it("m5.8xlarge", "m5", X86_64, 32, gib(128), None),
    it("m5.12xlarge", "m5", X86_64, 48, gib(192), None),
    it("m5.16xlarge", "m5", X86_64, 64, gib(256), None),
    it("m6g.large", "m6g", Arm64, 2, gib(8), None),
    it("m6g.xlarge", "m6g", Arm64, 4, gib(16), None),
    it("m6g.2xlarge", "m6g", Arm64, 8, gib(32), None),
    it("m6g.4xlarge", "m6g", Arm64, 16, gib(64), None),
    it("m6g.8xlarge", "m6g", Arm64, 32, gib(128), None),
    it("m6g.12xlarge", "m6g", Arm64, 48, gib(192), None),
    it("m6g.16xlarge", "m6g", Arm64, 64, gib(256), None),
    it("m6i.large", "m6i", X86_64, 2, gib(8), None),
    it("m6i.xlarge", "m6i", X86_64, 4, gib(16), None),
    it("m6i.2xlarge", "m6i", X86_64, 8, gib(32), None),
    it("m6i.4xlarge", "m6i", X86_64, 16, gib(64), None),
    it("m6i.8xlarge", "m6i", X86_64, 32, gib(128), None),
    it("m6i.12xlarge", "m6i", X86_64, 48, gib(192), None),
    it("m6i.16xlarge", "m6i", X86_64, 64, gib(256), None),
    it("m7g.large", "m7g", Arm64, 2, gib(8), None),
    it("m7g.xlarge", "m7g", Arm64, 4, gib(16), None),
    it("m7g.2xlarge", "m7g", Arm64, 8, gib(32), None),
    it("m7g.4xlarge", "m7g", Arm64, 16, gib(64), None),
    it("m7g.8xlarge", "m7g", Arm64, 32, gib(128), None),
    it("m7g.12xlarge", "m7g", Arm64, 48, gib(192), None),
    it("m7g.16xlarge", "m7g", Arm64, 64, gib(256), None),
    it("m7i.large", "m7i", X86_64, 2, gib(8), None),
    it("m7i.xlarge", "m7i", X86_64, 4, gib(16), None),
    it("m7i.2xlarge", "m7i", X86_64, 8, gib(32), None),
    it("m7i.4xlarge", "m7i", X86_64, 16, gib(64), None),
    it("m7i.8xlarge", "m7i", X86_64, 32, gib(128), None),
    it("m7i.12xlarge", "m7i", X86_64, 48, gib(192), None),
    it("m7i.16xlarge", "m7i", X86_64, 64, gib(256), None),
    it("m8g.large", "m8g", Arm64, 2, gib(8), None),
    it("m8g.xlarge", "m8g", Arm64, 4, gib(16), None),
    it("m8g.2xlarge", "m8g", Arm64, 8, gib(32), None),
    it("m8g.4xlarge", "m8g", Arm64, 16, gib(64), None),
    it("m8g.8xlarge", "m8g", Arm64, 32, gib(128), None),
    it("m8g.12xlarge", "m8g", Arm64, 48, gib(192), None),
    it("m8g.16xlarge", "m8g", Arm64, 64, gib(256), None),
    it("r5.large", "r5", X86_64, 2, gib(16), None),
    it("r5.xlarge", "r5", X86_64, 4, gib(32), None),
    it("r5.2xlarge", "r5", X86_64, 8, gib(64), None),
    it("r5.4xlarge", "r5", X86_64, 16, gib(128), None),
    it("r5.8xlarge", "r5", X86_64, 32, gib(256), None),
    it("r5.12xlarge", "r5", X86_64, 48, gib(384), None),
    it("r5.16xlarge", "r5", X86_64, 64, gib(512), None),
    it("r6g.large", "r6g", Arm64, 2, gib(16), None),
    it("r6g.xlarge", "r6g", Arm64, 4, gib(32), None),
    it("r6g.2xlarge", "r6g", Arm64, 8, gib(64), None),
    it("r6g.4xlarge", "r6g", Arm64, 16, gib(128), None),
    it("r6g.8xlarge", "r6g", Arm64, 32, gib(256), None),
    it("r6g.12xlarge", "r6g", Arm64, 48, gib(384), None),
    it("r6g.16xlarge", "r6g", Arm64, 64, gib(512), None),
    it("r6i.large", "r6i", X86_64, 2, gib(16), None),
    it("r6i.xlarge", "r6i", X86_64, 4, gib(32), None),
    it("r6i.2xlarge", "r6i", X86_64, 8, gib(64), None),
    it("r6i.4xlarge", "r6i", X86_64, 16, gib(128), None),
    it("r6i.8xlarge", "r6i", X86_64, 32, gib(256), None),
    it("r6i.12xlarge", "r6i", X86_64, 48, gib(384), None),
    it("r6i.16xlarge", "r6i", X86_64, 64, gib(512), None),
    it("r7g.large", "r7g", Arm64, 2, gib(16), None),
    it("r7g.xlarge", "r7g", Arm64, 4, gib(32), None),
    it("r7g.2xlarge", "r7g", Arm64, 8, gib(64), None),
    it("r7g.4xlarge", "r7g", Arm64, 16, gib(128), None),
    it("r7g.8xlarge", "r7g", Arm64, 32, gib(256), None),
    it("r7g.12xlarge", "r7g", Arm64, 48, gib(384), None),
    it("r7g.16xlarge", "r7g", Arm64, 64, gib(512), None),
    it("r7i.large", "r7i", X86_64, 2, gib(16), None),
    it("r7i.xlarge", "r7i", X86_64, 4, gib(32), None),
    it("r7i.2xlarge", "r7i", X86_64, 8, gib(64), None),
    it("r7i.4xlarge", "r7i", X86_64, 16, gib(128), None),
    it("r7i.8xlarge", "r7i", X86_64, 32, gib(256), None),
    it("r7i.12xlarge", "r7i", X86_64, 48, gib(384), None),
    it("r7i.16xlarge", "r7i", X86_64, 64, gib(512), None),
    it("r8g.large", "r8g", Arm64, 2, gib(16), None),
    it("r8g.xlarge", "r8g", Arm64, 4, gib(32), None),
    it("r8g.2xlarge", "r8g", Arm64, 8, gib(64), None),
    it("r8g.4xlarge", "r8g", Arm64, 16, gib(128), None),
    it("r8g.8xlarge", "r8g", Arm64, 32, gib(256), None),
    it("r8g.12xlarge", "r8g", Arm64, 48, gib(384), None),
    it("r8g.16xlarge", "r8g", Arm64, 64, gib(512), None),
];

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    fn get(name: &str) -> &'static InstanceType {
        match lookup(name) {
            Some(t) => t,
            None => panic!("{name} should be in the catalog"),
        }
    }

    fn sizes_of(family: &str) -> Vec<&'static str> {
        all()
            .iter()
            .filter(|t| t.family == family)
            .map(|t| size_of(t.name))
            .collect()
    }

    const SEVEN: [&str; 7] = [
        "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge",
    ];
    const NO_12: [&str; 6] = [
        "large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge",
    ];

    #[test]
    fn every_family_is_present_with_its_sizes() {
        for family in [
            "m6g", "m7g", "m8g", "c6g", "c7g", "r6g", "r7g", "r8g", "m5", "r5", "m6i", "m7i",
            "c6i", "c7i", "r6i", "r7i", "i4i",
        ] {
            assert_eq!(sizes_of(family), SEVEN, "{family}");
        }
        for family in ["im4gn", "i4g", "i3"] {
            assert_eq!(sizes_of(family), NO_12, "{family}");
        }
        assert_eq!(
            sizes_of("c5"),
            [
                "large", "xlarge", "2xlarge", "4xlarge", "9xlarge", "12xlarge"
            ]
        );
        let families: HashSet<&str> = all().iter().map(|t| t.family).collect();
        assert_eq!(families.len(), 21);
        assert_eq!(all().len(), 17 * 7 + 3 * 6 + 6);
    }

    #[test]
    fn known_types_have_aws_figures() {
        assert_eq!(
            *get("m6g.xlarge"),
            InstanceType {
                name: "m6g.xlarge",
                family: "m6g",
                arch: Arch::Arm64,
                vcpus: 4,
                memory_mib: 16384,
                local_nvme_gb: None,
            }
        );
        assert_eq!(get("m5.xlarge").arch, Arch::X86_64);
        assert_eq!(get("c7g.2xlarge").memory_mib, 16 * 1024);
        assert_eq!(get("r8g.12xlarge").memory_mib, 384 * 1024);
        assert_eq!(get("c5.9xlarge").vcpus, 36);
        assert_eq!(get("c5.9xlarge").memory_mib, 72 * 1024);
        assert_eq!(get("c5.12xlarge").memory_mib, 96 * 1024);
        assert_eq!(get("i3.large").memory_mib, 15616);
        assert_eq!(get("i3.16xlarge").memory_mib, 488 * 1024);
        assert_eq!(get("i3.8xlarge").local_nvme_gb, Some(7600));
        assert_eq!(get("im4gn.large").local_nvme_gb, Some(937));
        assert_eq!(get("im4gn.16xlarge").local_nvme_gb, Some(30000));
        assert_eq!(get("im4gn.4xlarge").memory_mib, 64 * 1024);
        assert_eq!(get("i4g.xlarge").local_nvme_gb, Some(937));
        assert_eq!(get("i4g.16xlarge").memory_mib, 512 * 1024);
        assert_eq!(get("i4i.12xlarge").local_nvme_gb, Some(11250));
        assert_eq!(get("i4i.large").local_nvme_gb, Some(468));
    }

    #[test]
    fn absent_and_misspelt_names_are_not_found() {
        for name in [
            "c5.8xlarge",
            "c5.16xlarge",
            "i3.12xlarge",
            "im4gn.12xlarge",
            "M6G.XLARGE",
            " m6g.xlarge",
            "m6g",
            "",
        ] {
            assert_eq!(lookup(name), None, "{name}");
        }
    }

    #[test]
    fn names_are_unique_and_well_formed() {
        let mut seen = HashSet::new();
        for t in all() {
            assert!(seen.insert(t.name), "duplicate {}", t.name);
            assert_eq!(t.name.split_once('.').map(|(f, _)| f), Some(t.family));
            assert_eq!(size_vcpus(size_of(t.name)), Some(t.vcpus), "{}", t.name);
            assert_eq!(t.name, t.name.to_ascii_lowercase());
        }
    }

    #[test]
    fn catalog_is_sorted_by_family_then_vcpus() {
        let keys: Vec<(&str, u32)> = all().iter().map(|t| (t.family, t.vcpus)).collect();
        let mut sorted = keys.clone();
        sorted.sort();
        assert_eq!(keys, sorted);
    }

    #[test]
    fn architecture_follows_the_family() {
        for t in all() {
            let graviton = t.family.ends_with('g') || t.family == "im4gn";
            let expected = if graviton { Arch::Arm64 } else { Arch::X86_64 };
            assert_eq!(t.arch, expected, "{}", t.name);
        }
    }

    #[test]
    fn memory_ratio_matches_the_family_kind() {
        for t in all() {
            let gib_per_vcpu = match t.family.chars().next() {
                Some('c') => 2,
                Some('m') => 4,
                Some('r') => 8,
                _ => continue,
            };
            if t.family == "im4gn" {
                continue;
            }
            assert_eq!(t.memory_mib, t.vcpus * gib_per_vcpu * 1024, "{}", t.name);
        }
    }

    #[test]
    fn heap_is_half_the_ram_capped_below_compressed_oops_limit() {
        assert_eq!(jvm_heap_mib(get("m6g.xlarge").memory_mib), 8192);
        assert_eq!(jvm_heap_mib(get("r6g.16xlarge").memory_mib), 31744);
        assert_eq!(jvm_heap_mib(get("r6g.4xlarge").memory_mib), 31744);
        assert_eq!(jvm_heap_mib(get("r6g.2xlarge").memory_mib), 31744);
        assert_eq!(jvm_heap_mib(get("r6g.xlarge").memory_mib), 16384);
        assert_eq!(jvm_heap_mib(get("i3.large").memory_mib), 7808);
        assert_eq!(jvm_heap_mib(0), 0);
        assert_eq!(jvm_heap_mib(u32::MAX), MAX_HEAP_MIB);
    }

    #[test]
    fn arch_parses_canonical_names_and_aliases() {
        assert_eq!(Arch::parse("arm64"), Some(Arch::Arm64));
        assert_eq!(Arch::parse("aarch64"), Some(Arch::Arm64));
        assert_eq!(Arch::parse("x86_64"), Some(Arch::X86_64));
        assert_eq!(Arch::parse("amd64"), Some(Arch::X86_64));
        assert_eq!(Arch::parse("x86"), Some(Arch::X86_64));
        assert_eq!(Arch::parse("ARM64"), None);
        assert_eq!(Arch::parse("riscv64"), None);
        assert_eq!(Arch::parse(""), None);
        for arch in [Arch::Arm64, Arch::X86_64] {
            assert_eq!(Arch::parse(arch.as_str()), Some(arch));
            assert_eq!(arch.to_string(), arch.as_str());
        }
    }

    #[test]
    fn arch_json_uses_snake_case_names() {
        assert_eq!(
            serde_json::to_string(&Arch::Arm64).ok(),
            Some("\"arm64\"".into())
        );
        assert_eq!(
            serde_json::to_string(&Arch::X86_64).ok(),
            Some("\"x86_64\"".into())
        );
        assert_eq!(
            serde_json::from_str::<Arch>("\"x86_64\"").ok(),
            Some(Arch::X86_64)
        );
        assert!(serde_json::from_str::<Arch>("\"aarch64\"").is_err());
        assert!(serde_json::from_str::<Arch>("\"X86_64\"").is_err());
    }

    #[test]
    fn arch_schema_lists_the_json_names() {
        let schema = serde_json::to_value(<Arch as utoipa::PartialSchema>::schema()).ok();
        let values = schema.as_ref().and_then(|s| s.get("enum")).cloned();
        assert_eq!(values, Some(serde_json::json!(["arm64", "x86_64"])));
    }

    #[test]
    fn suggestions_fix_typos_and_missing_sizes() {
        assert_eq!(suggest("m6g.xlarg"), Some("m6g.xlarge"));
        assert_eq!(suggest("M6G.XLARGE"), Some("m6g.xlarge"));
        assert_eq!(suggest(" r5.large "), Some("r5.large"));
        assert_eq!(suggest("m6gd.xlarge"), Some("m6g.xlarge"));
        assert_eq!(suggest("c5.8xlarge"), Some("c5.9xlarge"));
        assert_eq!(suggest("r6g.24xlarge"), Some("r6g.16xlarge"));
        assert_eq!(suggest("i3.12xlarge"), Some("i3.8xlarge"));
        assert_eq!(suggest("m6g.medium"), Some("m6g.large"));
        assert_eq!(suggest("m6g"), Some("m6g.large"));
        assert_eq!(suggest("m6g.huge"), Some("m6g.large"));
        assert_eq!(suggest("t3.micro"), None);
        assert_eq!(suggest("banana"), None);
        assert_eq!(suggest(""), None);
        assert_eq!(suggest("   "), None);
        assert_eq!(suggest(&"m6g.xlarge".repeat(100)), None);
    }

    #[test]
    fn edit_distance_counts_single_character_edits() {
        assert_eq!(edit_distance("", ""), 0);
        assert_eq!(edit_distance("abc", ""), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("m6g.xlarg", "m6g.xlarge"), 1);
        assert_eq!(edit_distance("m6g.xlarge", "m6g.xlarge"), 0);
    }
}
