//! Continuous profiles of a job (Grafana Pyroscope, fed by Grafana Alloy's eBPF profiler): the
//! profile types a request may ask for, the label selector built from the job's nodes and cgroup (every
//! value escaped), and the flame graph decoded from Pyroscope's flamebearer format into bars and the
//! top functions by self and total.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::promql::{LabelName, escape_regex, escape_value};

/// The profile types a request may name: `(short name, Pyroscope's profile type id)`.
pub const PROFILE_TYPES: &[(&str, &str)] = &[
    ("cpu", "process_cpu:cpu:nanoseconds:cpu:nanoseconds"),
    ("cpu_samples", "process_cpu:samples:count:cpu:nanoseconds"),
    ("alloc_space", "memory:alloc_space:bytes:space:bytes"),
    ("alloc_objects", "memory:alloc_objects:count:space:bytes"),
    ("inuse_space", "memory:inuse_space:bytes:space:bytes"),
    ("inuse_objects", "memory:inuse_objects:count:space:bytes"),
];

/// One of [`PROFILE_TYPES`], by its short name or its full id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfileType(&'static str);

impl serde::Serialize for ProfileType {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.0)
    }
}

impl<'de> serde::Deserialize<'de> for ProfileType {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        Self::try_from(text).map_err(serde::de::Error::custom)
    }
}

impl FromStr for ProfileType {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        PROFILE_TYPES.iter().find(|(short, id)| *short == text || *id == text).map(|(_, id)| Self(id)).ok_or_else(
            || {
                let known: Vec<&str> = PROFILE_TYPES.iter().map(|(short, _)| *short).collect();
                format!("is not a known profile type; known: {} (or their Pyroscope ids)", known.join(", "))
            },
        )
    }
}

impl TryFrom<String> for ProfileType {
    type Error = String;
    fn try_from(text: String) -> Result<Self, Self::Error> {
        text.parse().map_err(|e| format!("`{text}` {e}"))
    }
}

impl From<ProfileType> for String {
    fn from(profile_type: ProfileType) -> Self {
        profile_type.0.to_string()
    }
}

impl ProfileType {
    /// Pyroscope's id (`process_cpu:cpu:nanoseconds:cpu:nanoseconds`).
    pub fn id(self) -> &'static str {
        self.0
    }

    /// The unit of the values (`nanoseconds`, `bytes`, `count`): the id's third part.
    pub fn unit(self) -> &'static str {
        self.0.split(':').nth(2).unwrap_or("")
    }
}

impl Default for ProfileType {
    fn default() -> Self {
        Self(PROFILE_TYPES[0].1)
    }
}

/// The profiles of one job: its profile type, its nodes by the host label, its cgroup by the cgroup
/// label (`…/job_<id>` and below, in Slurm's cgroup v1 and v2 layouts, or `…/<SLUID>` where Slurm
/// ≥ 26.05 named the job's cgroup by SLUID and the plugin recorded it), and the site's service name.
#[derive(Debug, Clone)]
pub struct ProfileSelector<'a> {
    pub profile_type: ProfileType,
    pub host_label: &'a LabelName,
    /// The job's nodes (or the one picked among them); never empty.
    pub nodes: &'a [String],
    pub cgroup_label: &'a LabelName,
    pub job_id: u32,
    /// SLUIDs of the job's cgroups, from the paths the Slurm plugin recorded (usually none).
    pub sluids: &'a [String],
    pub service_name: Option<&'a str>,
}

impl fmt::Display for ProfileSelector<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hosts: Vec<String> = self.nodes.iter().map(|node| escape_regex(node)).collect();
        let mut matchers = Vec::new();
        if let Some(service) = self.service_name {
            matchers.push(format!("service_name=\"{}\"", escape_value(service)));
        }
        matchers.push(format!("{}=~\"{}\"", self.host_label, escape_value(&hosts.join("|"))));
        // v1: …/slurm/uid_1001/job_1234/step_0/task_0; v2: …/slurmstepd.scope/job_1234/step_0/user/task_0.
        let mut keys = vec![format!("job_{}", self.job_id)];
        keys.extend(self.sluids.iter().map(|sluid| escape_regex(sluid)));
        let cgroup =
            if keys.len() == 1 { format!(".*/{}(/.*)?", keys[0]) } else { format!(".*/({})(/.*)?", keys.join("|")) };
        matchers.push(format!("{}=~\"{}\"", self.cgroup_label, escape_value(&cgroup)));
        write!(f, "{}{{{}}}", self.profile_type.id(), matchers.join(","))
    }
}

/// Pyroscope's flamebearer: `names`, and per depth a flat list of `[offset, total, self, name]`
/// quadruples, each offset counted from the end of the bar before it on that level.
#[derive(Debug, Clone, Default, PartialEq, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Flamebearer {
    #[serde(default)]
    pub names: Vec<String>,
    #[serde(default)]
    pub levels: Vec<Vec<i64>>,
    #[serde(default)]
    pub num_ticks: i64,
    #[serde(default)]
    pub max_self: i64,
}

/// A decoded bar: absolute position in the root's units.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bar {
    pub level: u32,
    pub start: u64,
    pub total: u64,
    pub self_value: u64,
    pub name: String,
}

/// A function's totals.
#[derive(Debug, Clone, PartialEq)]
pub struct FunctionTotals {
    pub name: String,
    pub self_value: u64,
    pub total_value: u64,
}

/// Decodes the levels into bars with absolute starts; refuses a malformed answer rather than draw it.
pub fn decode(flamebearer: &Flamebearer) -> Result<Vec<Bar>, String> {
    let mut bars = Vec::new();
    for (level, values) in flamebearer.levels.iter().enumerate() {
        if values.len() % 4 != 0 {
            return Err(format!("level {level} holds {} numbers, not quadruples", values.len()));
        }
        let mut end = 0u64;
        for quad in values.chunks_exact(4) {
            let [offset, total, self_value, name] = [quad[0], quad[1], quad[2], quad[3]];
            let as_u64 = |value: i64, what: &str| {
                u64::try_from(value).map_err(|_| format!("level {level}: negative {what} {value}"))
            };
            let start =
                end.checked_add(as_u64(offset, "offset")?).ok_or_else(|| format!("level {level}: offsets overflow"))?;
            let total = as_u64(total, "total")?;
            let name = usize::try_from(name).ok().and_then(|index| flamebearer.names.get(index)).ok_or_else(|| {
                format!("level {level}: name index {name} outside the {} names", flamebearer.names.len())
            })?;
            bars.push(Bar {
                level: level as u32,
                start,
                total,
                self_value: as_u64(self_value, "self")?,
                name: name.clone(),
            });
            end = start.checked_add(total).ok_or_else(|| format!("level {level}: totals overflow"))?;
        }
    }
    Ok(bars)
}

/// The parent of each bar (its index), found on the level above by position.
fn parents(bars: &[Bar]) -> Vec<Option<usize>> {
    let mut by_level: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (index, bar) in bars.iter().enumerate() {
        by_level.entry(bar.level).or_default().push(index);
    }
    let mut parent = vec![None; bars.len()];
    for (level, members) in &by_level {
        let Some(above) = level.checked_sub(1).and_then(|up| by_level.get(&up)) else {
            continue;
        };
        // Both levels are in left-to-right order: one pass finds each bar's container.
        let mut cursor = 0;
        for &child in members {
            let x = bars[child].start;
            while cursor < above.len() && bars[above[cursor]].start + bars[above[cursor]].total <= x {
                cursor += 1;
            }
            if let Some(&candidate) = above.get(cursor)
                && bars[candidate].start <= x
            {
                parent[child] = Some(candidate);
            }
        }
    }
    parent
}

/// Every function below the root with its self value and its total counted once per stack (a
/// recursive function's inner calls are not added again), largest total first.
pub fn function_totals(bars: &[Bar]) -> Vec<FunctionTotals> {
    let parent = parents(bars);
    let mut totals: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for (index, bar) in bars.iter().enumerate() {
        if bar.level == 0 {
            continue;
        }
        let entry = totals.entry(bar.name.as_str()).or_default();
        entry.0 += bar.self_value;
        let mut up = parent[index];
        let mut outermost = true;
        while let Some(ancestor) = up {
            if bars[ancestor].level > 0 && bars[ancestor].name == bar.name {
                outermost = false;
                break;
            }
            up = parent[ancestor];
        }
        if outermost {
            entry.1 += bar.total;
        }
    }
    let mut functions: Vec<FunctionTotals> = totals
        .into_iter()
        .map(|(name, (self_value, total_value))| FunctionTotals { name: name.to_string(), self_value, total_value })
        .collect();
    functions.sort_by(|a, b| b.total_value.cmp(&a.total_value).then_with(|| a.name.cmp(&b.name)));
    functions
}

/// The profile's root value: the level-0 bar's total, else `numTicks`.
pub fn root_total(flamebearer: &Flamebearer, bars: &[Bar]) -> u64 {
    bars.iter()
        .filter(|bar| bar.level == 0)
        .map(|bar| bar.total)
        .sum::<u64>()
        .max(u64::try_from(flamebearer.num_ticks).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn label(text: &str) -> LabelName {
        text.parse().expect("label name")
    }

    #[test]
    fn profile_types_come_from_the_allowlist_only() {
        assert_eq!(
            "cpu".parse::<ProfileType>().map(ProfileType::id),
            Ok("process_cpu:cpu:nanoseconds:cpu:nanoseconds")
        );
        assert_eq!(
            "memory:inuse_space:bytes:space:bytes".parse::<ProfileType>().map(ProfileType::id),
            Ok("memory:inuse_space:bytes:space:bytes")
        );
        assert_eq!("alloc_space".parse::<ProfileType>().map(ProfileType::unit), Ok("bytes"));
        for bad in ["", "CPU", "cpu{}", "process_cpu:cpu:nanoseconds:cpu:nanoseconds{x=\"y\"}", "goroutine"] {
            assert!(bad.parse::<ProfileType>().is_err(), "{bad}");
        }
    }

    #[test]
    fn a_selector_holds_the_jobs_nodes_and_cgroup_escaped() {
        let (host, cgroup) = (label("hostname"), label("cgroup_path"));
        let nodes = vec!["n1".to_string(), "gpu.2".to_string()];
        let selector = ProfileSelector {
            profile_type: ProfileType::default(),
            host_label: &host,
            nodes: &nodes,
            cgroup_label: &cgroup,
            job_id: 1234,
            sluids: &[],
            service_name: Some("slurm \"jobs\""),
        };
        assert_eq!(
            selector.to_string(),
            r#"process_cpu:cpu:nanoseconds:cpu:nanoseconds{service_name="slurm \"jobs\"",hostname=~"n1|gpu\\.2",cgroup_path=~".*/job_1234(/.*)?"}"#
        );
        let odd = vec!["a\"b|c".to_string()];
        let no_service = ProfileSelector { nodes: &odd, service_name: None, ..selector };
        assert_eq!(
            no_service.to_string(),
            r#"process_cpu:cpu:nanoseconds:cpu:nanoseconds{hostname=~"a\"b\\|c",cgroup_path=~".*/job_1234(/.*)?"}"#
        );
        // Slurm ≥ 26.05 names the job's cgroup by SLUID: the recorded one is matched too.
        let sluids = ["s5K1KKYAYG5D00".to_string()];
        let by_sluid = ProfileSelector { sluids: &sluids, service_name: None, ..selector };
        assert!(by_sluid.to_string().ends_with(r#"cgroup_path=~".*/(job_1234|s5K1KKYAYG5D00)(/.*)?"}"#), "{by_sluid}");
    }

    /// A recorded single-format answer: total 988 = runtime.main 988 → (fastFunction 214 → work 214),
    /// (main.main 3, self 2 → fastFunction 1, self 1), (slowFunction 771 → work 771).
    fn recorded() -> Flamebearer {
        Flamebearer {
            names: ["total", "runtime.main", "main.slowFunction", "main.work", "main.main", "main.fastFunction"]
                .map(String::from)
                .to_vec(),
            levels: vec![
                vec![0, 988, 0, 0],
                vec![0, 988, 0, 1],
                vec![0, 214, 0, 5, 0, 3, 2, 4, 0, 771, 0, 2],
                vec![0, 214, 214, 3, 2, 1, 1, 5, 0, 771, 771, 3],
            ],
            num_ticks: 988,
            max_self: 771,
        }
    }

    #[test]
    fn decodes_delta_encoded_offsets_into_absolute_bars() {
        let bars = decode(&recorded()).expect("decodes");
        let level3: Vec<(u64, u64, &str)> =
            bars.iter().filter(|b| b.level == 3).map(|b| (b.start, b.total, b.name.as_str())).collect();
        // work under fastFunction at 0; fastFunction under main.main at 214 + 2; work under slowFunction at 217.
        assert_eq!(level3, [(0, 214, "main.work"), (216, 1, "main.fastFunction"), (217, 771, "main.work")]);
        assert_eq!(root_total(&recorded(), &bars), 988);
    }

    #[test]
    fn function_totals_count_self_and_total_once_per_stack() {
        let bars = decode(&recorded()).expect("decodes");
        let functions = function_totals(&bars);
        let find = |name: &str| functions.iter().find(|f| f.name == name).expect(name).clone();
        assert_eq!((find("main.work").self_value, find("main.work").total_value), (985, 985));
        assert_eq!((find("main.fastFunction").self_value, find("main.fastFunction").total_value), (1, 215));
        assert_eq!((find("main.main").self_value, find("main.main").total_value), (2, 3));
        assert_eq!(find("runtime.main").total_value, 988);
        assert!(functions.iter().all(|f| f.name != "total"), "the root is not a function");
    }

    #[test]
    fn recursion_is_counted_once() {
        let flamebearer = Flamebearer {
            names: ["total", "f", "g"].map(String::from).to_vec(),
            levels: vec![vec![0, 10, 0, 0], vec![0, 10, 2, 1], vec![0, 8, 3, 1], vec![0, 5, 5, 2]],
            num_ticks: 10,
            max_self: 5,
        };
        let functions = function_totals(&decode(&flamebearer).expect("decodes"));
        assert_eq!(functions[0], FunctionTotals { name: "f".into(), self_value: 5, total_value: 10 });
        assert_eq!(functions[1], FunctionTotals { name: "g".into(), self_value: 5, total_value: 5 });
    }

    #[test]
    fn refuses_malformed_levels() {
        let mut bad = recorded();
        bad.levels[1] = vec![0, 988, 0];
        assert!(decode(&bad).is_err());
        bad.levels[1] = vec![0, 988, 0, 42];
        assert!(decode(&bad).is_err());
        bad.levels[1] = vec![-1, 988, 0, 1];
        assert!(decode(&bad).is_err());
    }
}
