//! Trackable resources (TRES): slurmdbd's `id=count` strings and sacct's `name=value` rendering.

use std::collections::BTreeMap;
use std::fmt;

/// A TRES id from slurmdbd's `tres_table` (1 cpu, 2 mem, 4 node, 5 billing, ≥1001 dynamic ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TresId(pub u32);

/// Fixed TRES ids; Slurm hard-codes these (`TRES_CPU` … `TRES_BILLING` in slurmdb.h).
impl TresId {
    pub const CPU: Self = Self(1);
    pub const MEM: Self = Self(2);
    pub const ENERGY: Self = Self(3);
    pub const NODE: Self = Self(4);
    pub const BILLING: Self = Self(5);
}

/// slurmdbd's "no value" for 64-bit counters (energy that was never gathered).
const NO_VAL64: u64 = 0xffff_ffff_ffff_fffe;

/// Why a TRES string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed TRES string `{0}`")]
pub struct TresError(pub String);

/// A parsed TRES string (`1=2,2=1000,4=1,1001=2`), ordered by id.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TresMap(BTreeMap<TresId, u64>);

impl TresMap {
    /// Parses slurmdbd's `id=count` list; `""` is empty. `NO_VAL64` entries are dropped as sacct does.
    pub fn parse(text: &str) -> Result<Self, TresError> {
        let mut map = BTreeMap::new();
        for item in text.split(',').map(str::trim).filter(|item| !item.is_empty()) {
            let (id, count) = item.split_once('=').ok_or_else(|| TresError(text.to_string()))?;
            let id: u32 = id.trim().parse().map_err(|_| TresError(text.to_string()))?;
            let count: u64 = count.trim().parse().map_err(|_| TresError(text.to_string()))?;
            if count != NO_VAL64 {
                map.insert(TresId(id), count);
            }
        }
        Ok(Self(map))
    }

    pub fn get(&self, id: TresId) -> Option<u64> {
        self.0.get(&id).copied()
    }

    pub fn iter(&self) -> impl Iterator<Item = (TresId, u64)> + '_ {
        self.0.iter().map(|(&id, &count)| (id, count))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// One row of `tres_table`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TresKind {
    pub id: TresId,
    /// `cpu`, `mem`, `gres`, `fs`, ….
    pub kind: String,
    /// `gpu` for `gres/gpu`, empty for the fixed ones.
    pub name: String,
}

impl TresKind {
    /// The name sacct prints: `cpu`, `gres/gpu`, `fs/disk`.
    pub fn display_name(&self) -> String {
        if self.name.is_empty() { self.kind.clone() } else { format!("{}/{}", self.kind, self.name) }
    }
}

/// The cluster's TRES catalogue, read from `tres_table`; gres ids are dynamic and never hard-coded.
#[derive(Debug, Clone, Default)]
pub struct TresCatalog {
    by_id: BTreeMap<TresId, TresKind>,
    /// Each kind's [`TresKind::display_name`], made once: a listing renders two TRES strings a job.
    names: BTreeMap<TresId, String>,
}

impl TresCatalog {
    pub fn new(kinds: impl IntoIterator<Item = TresKind>) -> Self {
        let by_id: BTreeMap<TresId, TresKind> = kinds.into_iter().map(|kind| (kind.id, kind)).collect();
        let names = by_id.iter().map(|(&id, kind)| (id, kind.display_name())).collect();
        Self { by_id, names }
    }

    /// The id of `gres/gpu`, if this site tracks GPUs.
    pub fn gpu_id(&self) -> Option<TresId> {
        self.by_id.values().find(|kind| kind.kind == "gres" && kind.name == "gpu").map(|kind| kind.id)
    }

    /// GPUs in a TRES map (0 when the site does not track `gres/gpu`).
    pub fn gpus(&self, tres: &TresMap) -> u64 {
        self.gpu_id().and_then(|id| tres.get(id)).unwrap_or(0)
    }

    /// Renders as sacct does: `name=value` sorted by name, memory with an exact unit (`1000M`, `4G`).
    pub fn render(&self, tres: &TresMap) -> String {
        let mut parts: Vec<(&str, &TresKind, u64)> = tres
            .iter()
            .filter_map(|(id, count)| Some((self.names.get(&id)?.as_str(), self.by_id.get(&id)?, count)))
            .collect();
        parts.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let mut out = String::with_capacity(parts.len() * 16);
        for (index, (name, kind, count)) in parts.into_iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            out.push_str(name);
            out.push('=');
            match kind.kind.as_str() {
                "mem" | "vmem" | "fs" | "bb" => push_megabytes_exact(&mut out, count),
                _ => push_number(&mut out, count),
            }
        }
        out
    }
}

/// Appends `value` in decimal.
fn push_number(out: &mut String, value: u64) {
    use std::fmt::Write as _;
    // Writing into a String cannot fail.
    let _ = write!(out, "{value}");
}

/// Appends [`megabytes_exact`] of `megabytes`.
fn push_megabytes_exact(out: &mut String, megabytes: u64) {
    let (value, unit) = exact_unit(megabytes);
    push_number(out, value);
    out.push_str(unit);
}

/// Megabytes as the largest unit that divides them exactly, and that unit.
fn exact_unit(megabytes: u64) -> (u64, &'static str) {
    const UNITS: [&str; 5] = ["M", "G", "T", "P", "E"];
    let mut value = megabytes;
    let mut unit = 0;
    while value != 0 && value.is_multiple_of(1024) && unit + 1 < UNITS.len() {
        value /= 1024;
        unit += 1;
    }
    (value, UNITS[unit])
}

/// Memory in MB rendered with the largest unit that divides it exactly (`1000M`, `4G`, `2T`).
pub fn megabytes_exact(megabytes: u64) -> String {
    let (value, unit) = exact_unit(megabytes);
    format!("{value}{unit}")
}

/// `mem_req` as slurmdbd stores it: megabytes, bit 63 marks "per CPU".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemRequest {
    PerNode(u64),
    PerCpu(u64),
}

impl MemRequest {
    const PER_CPU_BIT: u64 = 1 << 63;

    pub fn from_raw(raw: u64) -> Self {
        if raw & Self::PER_CPU_BIT != 0 { Self::PerCpu(raw & !Self::PER_CPU_BIT) } else { Self::PerNode(raw) }
    }
}

impl fmt::Display for MemRequest {
    /// sacct's `ReqMem` since 21.08: `1000M` per node, `500Mc` per CPU.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::PerNode(mb) => write!(f, "{}", megabytes_exact(*mb)),
            Self::PerCpu(mb) => write!(f, "{}c", megabytes_exact(*mb)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn catalog() -> TresCatalog {
        let kind = |id, kind: &str, name: &str| TresKind { id: TresId(id), kind: kind.into(), name: name.into() };
        TresCatalog::new([
            kind(1, "cpu", ""),
            kind(2, "mem", ""),
            kind(3, "energy", ""),
            kind(4, "node", ""),
            kind(5, "billing", ""),
            kind(1001, "gres", "gpu"),
        ])
    }

    #[test]
    fn renders_alloc_tres_like_sacct() {
        let tres = TresMap::parse("1=2,2=1000,3=18446744073709551614,4=1,5=2,1001=2").expect("valid");
        assert_eq!(catalog().render(&tres), "billing=2,cpu=2,gres/gpu=2,mem=1000M,node=1");
        assert_eq!(catalog().gpus(&tres), 2);
        let big = TresMap::parse("1=8,2=4096,4=1").expect("valid");
        assert_eq!(catalog().render(&big), "cpu=8,mem=4G,node=1");
    }

    #[test]
    fn gpu_id_is_looked_up_not_assumed() {
        let kinds = [TresKind { id: TresId(1002), kind: "gres".into(), name: "gpu".into() }];
        let catalog = TresCatalog::new(kinds);
        assert_eq!(catalog.gpu_id(), Some(TresId(1002)));
        assert_eq!(catalog.gpus(&TresMap::parse("1001=4,1002=3").expect("valid")), 3);
    }

    #[test]
    fn decodes_mem_req_per_cpu_bit() {
        assert_eq!(MemRequest::from_raw(9223372036854776308), MemRequest::PerCpu(500));
        assert_eq!(MemRequest::from_raw(2048).to_string(), "2G");
        assert_eq!(MemRequest::from_raw(9223372036854776308).to_string(), "500Mc");
    }

    #[test]
    fn rejects_malformed_tres() {
        for bad in ["1", "a=1", "1=x", "1=2,=3", "1=-2"] {
            assert!(TresMap::parse(bad).is_err(), "{bad}");
        }
        assert!(TresMap::parse("").expect("empty is fine").is_empty());
    }

    proptest! {
        #[test]
        fn parse_reads_back_what_was_written(entries in proptest::collection::btree_map(1u32..3000, 0u64..1u64 << 40, 0..12)) {
            let text = entries.iter().map(|(id, count)| format!("{id}={count}")).collect::<Vec<_>>().join(",");
            let parsed = TresMap::parse(&text).expect("generated string parses");
            let back: BTreeMap<u32, u64> = parsed.iter().map(|(id, count)| (id.0, count)).collect();
            prop_assert_eq!(back, entries);
        }

        #[test]
        fn megabytes_exact_round_trips(mb in 0u64..1u64 << 40) {
            let text = megabytes_exact(mb);
            let (digits, unit) = text.split_at(text.len() - 1);
            let scale = match unit { "M" => 1, "G" => 1024, "T" => 1024 * 1024, "P" => 1u64 << 30, _ => 1u64 << 40 };
            prop_assert_eq!(digits.parse::<u64>().expect("digits") * scale, mb);
        }
    }
}
