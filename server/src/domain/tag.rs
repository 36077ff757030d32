//! Job tags: short lowercase words (`pytorch`, `ablation-3`) that users put on their jobs and that
//! rules put on any job from what it ran (its batch script, the process names its traces saw). The
//! rules are small tables, one per application: a word in the script or a process name shows it.

use std::collections::BTreeSet;

/// Longest tag, in characters.
pub const MAX_TAG_CHARS: usize = 32;
/// Most tags one job record holds (set by people and rules together).
pub const MAX_TAGS_PER_JOB: usize = 16;

/// A tag: 1–32 characters of `a-z`, `0-9`, `.`, `_`, `-`, starting with a letter or digit.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Tag(String);

/// Why a tag was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BadTag {
    #[error("a tag is not empty")]
    Empty,
    #[error("a tag is at most {MAX_TAG_CHARS} characters")]
    TooLong,
    #[error("a tag starts with a lowercase letter or a digit")]
    BadStart,
    #[error("a tag holds lowercase letters, digits, `.`, `_` and `-` only")]
    BadCharacter,
}

impl Tag {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Tag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for Tag {
    type Err = BadTag;

    /// Parses a tag exactly as written: no trimming, no case folding (`PyTorch` is refused, so that a
    /// filter never silently means something other than what it says).
    fn from_str(text: &str) -> Result<Self, BadTag> {
        let mut chars = text.chars();
        let first = chars.next().ok_or(BadTag::Empty)?;
        if text.chars().count() > MAX_TAG_CHARS {
            return Err(BadTag::TooLong);
        }
        if !(first.is_ascii_lowercase() || first.is_ascii_digit()) {
            return Err(BadTag::BadStart);
        }
        let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-');
        if !chars.all(allowed) {
            return Err(BadTag::BadCharacter);
        }
        Ok(Self(text.to_string()))
    }
}

/// Who set a tag: a person (by user name), or the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TagSource {
    User(String),
    Rule,
}

impl TagSource {
    /// The stored word for the rules: no Slurm user name holds a colon.
    pub const RULE: &'static str = ":rule";

    /// As stored in `job_tags.set_by`.
    pub fn stored(&self) -> &str {
        match self {
            Self::User(name) => name,
            Self::Rule => Self::RULE,
        }
    }

    pub fn from_stored(text: &str) -> Self {
        if text == Self::RULE { Self::Rule } else { Self::User(text.to_string()) }
    }
}

/// One application's signs: words of a batch script (matched on word boundaries, ignoring case),
/// process names (the executable's base name, exactly) and the C++ namespaces of the kernels its
/// traces saw (`at::native::` is PyTorch's own).
struct AppRule {
    tag: &'static str,
    script_words: &'static [&'static str],
    processes: &'static [&'static str],
    kernels: &'static [&'static str],
}

/// The applications the rules know, each a small table. A script word is matched where it stands
/// alone between characters that are not part of a name (`torchrun`, `-m torch.distributed.run`).
const RULES: &[AppRule] = &[
    AppRule {
        tag: "pytorch",
        script_words: &[
            "torchrun",
            "torch.distributed.run",
            "torch.distributed.launch",
            "import torch",
            "torch.cuda",
            "pytorch",
        ],
        processes: &["torchrun", "pt_main_thread", "pt_elastic", "accelerate"],
        kernels: &["at::native::", "c10::"],
    },
    AppRule { tag: "deepspeed", script_words: &["deepspeed"], processes: &["deepspeed"], kernels: &["deepspeed::"] },
    AppRule {
        tag: "megatron",
        script_words: &["pretrain_gpt.py", "pretrain_bert.py", "pretrain_t5.py", "megatron", "megatron-lm"],
        processes: &[],
        kernels: &["megatron::"],
    },
    AppRule {
        tag: "nccl-tests",
        script_words: &[
            "all_reduce_perf",
            "all_gather_perf",
            "alltoall_perf",
            "broadcast_perf",
            "reduce_scatter_perf",
            "sendrecv_perf",
            "nccl-tests",
        ],
        processes: &[
            "all_reduce_perf",
            "all_gather_perf",
            "alltoall_perf",
            "broadcast_perf",
            "reduce_scatter_perf",
            "sendrecv_perf",
        ],
        kernels: &[],
    },
    AppRule { tag: "vllm", script_words: &["vllm", "vllm.entrypoints"], processes: &["vllm"], kernels: &["vllm::"] },
    AppRule {
        tag: "jax",
        script_words: &["import jax", "jax.distributed", "jaxlib"],
        processes: &[],
        kernels: &["xla::"],
    },
    AppRule {
        tag: "tensorflow",
        script_words: &["import tensorflow", "tensorflow", "tf.distribute"],
        processes: &[],
        kernels: &["tensorflow::"],
    },
    AppRule {
        tag: "nemo",
        script_words: &["nemo_run", "nemo.collections", "nemo-toolkit"],
        processes: &[],
        kernels: &[],
    },
    AppRule {
        tag: "gromacs",
        script_words: &["gmx_mpi", "gmx mdrun"],
        processes: &["gmx_mpi", "gmx"],
        kernels: &["gmx::", "nbnxm"],
    },
    AppRule { tag: "lammps", script_words: &["lmp", "lmp_mpi"], processes: &["lmp", "lmp_mpi"], kernels: &[] },
    AppRule { tag: "wrf", script_words: &["wrf.exe"], processes: &["wrf.exe"], kernels: &[] },
    AppRule { tag: "colabfold", script_words: &["colabfold_batch"], processes: &["colabfold_batch"], kernels: &[] },
    AppRule { tag: "qmcpack", script_words: &["qmcpack"], processes: &["qmcpack"], kernels: &[] },
];

/// Whether `word` stands in `text` (both lowercase) between characters that are not part of a name:
/// `torchrun` in `srun torchrun …` and in `/opt/bin/torchrun`, not in `torchrunner`; `vllm` in
/// `-m vllm.entrypoints…` (a module path), not in `my_vllm`.
fn stands_in(text: &str, word: &str) -> bool {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(word).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + word.len()..].chars().next();
        before.is_none_or(|c| !is_name(c) && c != '.') && after.is_none_or(|c| !is_name(c))
    })
}

/// Lines of a script that run something: comments (`#SBATCH` included) and blank lines are not.
fn running_lines(script: &str) -> String {
    script
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n")
        .to_ascii_lowercase()
}

/// The applications a batch script shows.
pub fn tags_from_script(script: &str) -> BTreeSet<Tag> {
    let text = running_lines(script);
    RULES
        .iter()
        .filter(|rule| rule.script_words.iter().any(|word| stands_in(&text, word)))
        .filter_map(|rule| rule.tag.parse().ok())
        .collect()
}

/// The applications that names of what ran show: process and step names (`/usr/bin/python3`,
/// `all_reduce_perf`, a step `torchrun`) and kernel names (`void at::native::vectorized_elementwise_kernel<…>`).
pub fn tags_from_traces<'a>(names: impl IntoIterator<Item = &'a str>) -> BTreeSet<Tag> {
    let names: Vec<&str> = names.into_iter().map(str::trim).collect();
    let processes: BTreeSet<String> =
        names.iter().map(|name| name.rsplit('/').next().unwrap_or(name).to_ascii_lowercase()).collect();
    RULES
        .iter()
        .filter(|rule| {
            rule.processes.iter().any(|process| processes.contains(*process))
                || rule.kernels.iter().any(|space| names.iter().any(|name| name.contains(space)))
        })
        .filter_map(|rule| rule.tag.parse().ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn tags(words: &[&str]) -> BTreeSet<Tag> {
        words.iter().map(|w| w.parse().expect("a tag")).collect()
    }

    #[test]
    fn parses_lowercase_words_and_refuses_the_rest() {
        for good in ["pytorch", "a", "0", "ablation-3", "run_2.b", &"x".repeat(32)] {
            assert_eq!(good.parse::<Tag>().map(|t| t.to_string()), Ok(good.to_string()), "{good}");
        }
        assert_eq!("".parse::<Tag>(), Err(BadTag::Empty));
        assert_eq!("x".repeat(33).parse::<Tag>(), Err(BadTag::TooLong));
        assert_eq!("PyTorch".parse::<Tag>(), Err(BadTag::BadStart));
        assert_eq!("-x".parse::<Tag>(), Err(BadTag::BadStart));
        assert_eq!("py torch".parse::<Tag>(), Err(BadTag::BadCharacter));
        assert_eq!("café".parse::<Tag>(), Err(BadTag::BadCharacter));
        assert_eq!("a/b".parse::<Tag>(), Err(BadTag::BadCharacter));
        assert_eq!(" pytorch".parse::<Tag>(), Err(BadTag::BadStart));
    }

    #[test]
    fn the_rules_own_word_is_no_user_name() {
        assert_eq!(TagSource::from_stored(TagSource::Rule.stored()), TagSource::Rule);
        assert_eq!(TagSource::from_stored("alice"), TagSource::User("alice".into()));
    }

    #[test]
    fn every_rule_tag_parses() {
        for rule in RULES {
            assert!(rule.tag.parse::<Tag>().is_ok(), "{}", rule.tag);
        }
    }

    #[test]
    fn torchrun_script_is_pytorch() {
        let script = "#!/bin/bash\n#SBATCH --job-name=llama\n#SBATCH --gres=gpu:8\nsource ~/venv/bin/activate\n\
            srun torchrun --nnodes=$SLURM_NNODES --nproc-per-node=8 --rdzv-backend=c10d train.py --config llama.yaml\n";
        assert_eq!(tags_from_script(script), tags(&["pytorch"]));
    }

    #[test]
    fn python_m_torch_distributed_is_pytorch() {
        let script = "#!/bin/bash\nsrun python -m torch.distributed.run --nproc_per_node 4 main.py\n";
        assert_eq!(tags_from_script(script), tags(&["pytorch"]));
        let launch = "#!/bin/sh\npython3 -m torch.distributed.launch --use_env finetune.py\n";
        assert_eq!(tags_from_script(launch), tags(&["pytorch"]));
    }

    #[test]
    fn megatron_with_torchrun_is_both() {
        let script = "#!/bin/bash\n#SBATCH -N 16\nexport CUDA_DEVICE_MAX_CONNECTIONS=1\ncd /opt/Megatron-LM\n\
            srun torchrun $DISTRIBUTED_ARGS pretrain_gpt.py --tensor-model-parallel-size 8 \\\n  --pipeline-model-parallel-size 2 --num-layers 32\n";
        assert_eq!(tags_from_script(script), tags(&["megatron", "pytorch"]));
    }

    #[test]
    fn deepspeed_launcher_is_deepspeed() {
        let script = "#!/bin/bash\n#SBATCH --nodes=2\ndeepspeed --hostfile=hostfile train.py --deepspeed --deepspeed_config ds_config.json\n";
        assert!(tags_from_script(script).contains(&"deepspeed".parse().expect("a tag")));
    }

    #[test]
    fn nccl_tests_are_found_by_their_binaries() {
        let script = "#!/bin/bash\n#SBATCH -N 4 --ntasks-per-node=8\nmodule load nccl\n\
            srun --mpi=pmix /opt/nccl-tests/build/all_reduce_perf -b 8 -e 8G -f 2 -g 1\n";
        assert_eq!(tags_from_script(script), tags(&["nccl-tests"]));
    }

    #[test]
    fn vllm_and_jax_scripts() {
        let vllm = "#!/bin/bash\npython -m vllm.entrypoints.openai.api_server --model meta-llama/Llama-3-8B --tensor-parallel-size 8\n";
        assert_eq!(tags_from_script(vllm), tags(&["vllm"]));
        let jax = "#!/bin/bash\nsrun python -c 'import jax; jax.distributed.initialize(); print(jax.devices())'\n";
        assert_eq!(tags_from_script(jax), tags(&["jax"]));
    }

    #[test]
    fn comments_and_lookalikes_show_nothing() {
        let script = "#!/bin/bash\n# TODO: move to torchrun and deepspeed\n#SBATCH --comment=megatron\n\
            echo torchrunner\n./my_vllmish_server\npython deepspeedy.py --out all_reduce_perf_old\n";
        assert_eq!(tags_from_script(script), BTreeSet::new());
        assert_eq!(tags_from_script("#!/bin/bash\nsleep 60\n"), BTreeSet::new());
    }

    #[test]
    fn traced_names_show_applications() {
        let names = ["/usr/bin/python3", "pt_main_thread", "all_reduce_perf", "bash"];
        assert_eq!(tags_from_traces(names), tags(&["nccl-tests", "pytorch"]));
        assert_eq!(tags_from_traces(["python3", "sleep", "ncclDevKernel_AllReduce_Sum_f32_RING_LL"]), BTreeSet::new());
        let kernels = [
            "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>(int, T1, T2)",
            "void vllm::paged_attention_v2_kernel<__nv_bfloat16, 128, 16, 128, 0, 512>(float *)",
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
        ];
        assert_eq!(tags_from_traces(kernels), tags(&["pytorch", "vllm"]));
    }

    #[test]
    fn step_names_as_srun_names_them_show_applications() {
        let steps = ["batch", "extern", "torchrun", "gmx_mpi", "wrf.exe", "lmp", "python", "bash"];
        assert_eq!(tags_from_traces(steps), tags(&["gromacs", "lammps", "pytorch", "wrf"]));
        let script = "#!/bin/bash\n#SBATCH -N 4\nmodule load wrf\nsrun ./wrf.exe\nsrun lmp -in in.lj\n";
        assert_eq!(tags_from_script(script), tags(&["lammps", "wrf"]));
    }

    proptest! {
        #[test]
        fn any_parsed_tag_is_its_text(text in "\\PC{0,40}") {
            if let Ok(tag) = text.parse::<Tag>() {
                prop_assert_eq!(tag.as_str(), text.as_str());
                prop_assert!(tag.as_str().len() <= MAX_TAG_CHARS);
                prop_assert!(tag.as_str().chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || ".-_".contains(c)));
            }
        }

        #[test]
        fn every_word_of_the_grammar_parses(text in "[a-z0-9][a-z0-9._-]{0,31}") {
            prop_assert_eq!(text.parse::<Tag>().map(|t| t.to_string()), Ok(text));
        }

        #[test]
        fn rules_never_panic_on_any_script(script in "\\PC{0,200}") {
            let _ = tags_from_script(&script);
        }
    }
}
