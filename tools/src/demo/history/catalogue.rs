//! The job catalogue as data: which jobs each research family submits, per category, with their project
//! folder, step name and command. [`job_template`] draws one entry.

use rand::Rng;
use rand::rngs::StdRng;

use super::workload::{Category, JobTemplate};

/// The research families accounts belong to; each submits its own kinds of jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Family {
    Llm,
    Vision,
    Bio,
    Climate,
    Physics,
    /// Generic machine learning: every account not named after another family.
    Ml,
}

impl Family {
    /// The family of an account, by its name (`ml-vision` is vision).
    pub(super) fn of_account(account: &str) -> Self {
        match account {
            "llm" => Family::Llm,
            "vision" | "ml-vision" => Family::Vision,
            "bio" => Family::Bio,
            "climate" => Family::Climate,
            "physics" => Family::Physics,
            _ => Family::Ml,
        }
    }

    fn jobs(self) -> &'static FamilyJobs {
        match self {
            Family::Llm => &LLM,
            Family::Vision => &VISION,
            Family::Bio => &BIO,
            Family::Climate => &CLIMATE,
            Family::Physics => &PHYSICS,
            Family::Ml => &ML,
        }
    }
}

/// A short GPU job with its own project folder; `{ckpt}` (or `{ckpt:07}`, zero-padded) in its name or
/// command stands for a checkpoint number drawn per job.
struct ShortJob {
    name: &'static str,
    project: &'static str,
    step: &'static str,
    command: &'static str,
}

/// A job whose project folder and script are named after it (array, long and CPU jobs, network checks).
struct NamedJob {
    name: &'static str,
    step: &'static str,
    command: &'static str,
}

/// A multi-node training run (or a het job's program); its step is named after the program it starts.
struct TrainingRun {
    name: &'static str,
    command: &'static str,
}

/// Everything one family submits, per category.
struct FamilyJobs {
    short: [ShortJob; 6],
    array: [NamedJob; 3],
    long: [NamedJob; 4],
    training: &'static [TrainingRun],
    cpu: &'static [NamedJob],
}

/// Job name, project directory, step name and command for a job of this category.
///
/// The draws from `rng` (a checkpoint number for short jobs first, then one entry) are part of the
/// generated history: the same seed must give the same jobs.
pub(super) fn job_template(
    rng: &mut StdRng,
    family: Family,
    category: Category,
    interactive: bool,
    jupyter: bool,
    network_check: bool,
) -> JobTemplate {
    let template = |name: String, project: &str, step: &'static str, command: String, script: String| JobTemplate {
        name,
        project: project.to_string(),
        step,
        cmd: command,
        script,
    };
    if interactive {
        return template("bash".into(), "scratch", "bash", "bash".into(), String::new());
    }
    if jupyter {
        return template(
            "jupyter".into(),
            "notebooks",
            "jupyter-lab",
            "jupyter lab --no-browser --ip=0.0.0.0 --port=8888".into(),
            "jupyter.sbatch".into(),
        );
    }
    let named = |job: &NamedJob| {
        let script = format!("{}.sh", job.name.replace('-', "_"));
        template(job.name.into(), job.name, job.step, job.command.into(), script)
    };
    let jobs = family.jobs();
    match category {
        Category::Short => {
            let checkpoint = 200 * rng.gen_range(1..=100u32);
            let job = &jobs.short[rng.gen_range(0..jobs.short.len())];
            let fill = |text: &str| {
                text.replace("{ckpt:07}", &format!("{checkpoint:07}")).replace("{ckpt}", &checkpoint.to_string())
            };
            let script = format!("{}.sh", job.project.replace('-', "_"));
            template(fill(job.name), job.project, job.step, fill(job.command), script)
        }
        Category::Array => named(one_of(rng, &jobs.array)),
        Category::Long => named(one_of(rng, &jobs.long)),
        Category::Multi if network_check => {
            let job = one_of(rng, &NETWORK_CHECKS);
            template(job.name.into(), "infra", job.step, job.command.into(), "nccl.sh".into())
        }
        Category::Multi => {
            let run = one_of(rng, jobs.training);
            let step = if run.command.starts_with("./") { "hmc" } else { "python" };
            let script = format!("train_{}.sh", run.name.replace(['-', '.'], "_"));
            template(run.name.into(), run.name, step, run.command.into(), script)
        }
        Category::Cpu => named(one_of(rng, jobs.cpu)),
        Category::Het => {
            let run = one_of(rng, &HET_JOBS);
            template(run.name.into(), run.name, "python", run.command.into(), "het.sh".into())
        }
    }
}

fn one_of<'a, T>(rng: &mut StdRng, entries: &'a [T]) -> &'a T {
    &entries[rng.gen_range(0..entries.len())]
}

/// NCCL and InfiniBand checks: short multi-node runs of the `infra` project.
const NETWORK_CHECKS: [NamedJob; 3] = [
    NamedJob { name: "nccl-tests", step: "all_reduce_perf", command: "all_reduce_perf -b 8 -e 8G -f 2 -g 1" },
    NamedJob {
        name: "nccl-allreduce",
        step: "all_reduce_perf",
        command: "all_reduce_perf -b 1G -e 16G -f 2 -g 1 -n 100",
    },
    NamedJob { name: "ib-bw-check", step: "python", command: "python ib_check.py --all-pairs" },
];

/// Heterogeneous jobs: a CPU component feeding a GPU one.
const HET_JOBS: [TrainingRun; 3] = [
    TrainingRun { name: "rl-actor-learner", command: "python learner.py --actors $SLURM_HET_SIZE" },
    TrainingRun { name: "serve-and-train", command: "python trainer.py --server $SLURM_JOB_NODELIST_HET_GROUP_0" },
    TrainingRun { name: "dataloader-trainer", command: "python train.py --remote-loader" },
];

const CPU_DATA_PREPARATION: &[NamedJob] = &[
    NamedJob {
        name: "tokenize-corpus",
        step: "python",
        command: "python tokenize_corpus.py --workers $SLURM_CPUS_PER_TASK",
    },
    NamedJob { name: "dedup-minhash", step: "python", command: "python dedup.py --minhash --threshold 0.8" },
    NamedJob { name: "pack-dataset", step: "python", command: "python pack.py --seq_len 8192" },
    NamedJob { name: "rsync-ckpt", step: "rsync", command: "rsync -a checkpoints/ /lustre/archive/" },
    NamedJob { name: "hf-upload", step: "python", command: "python upload.py --repo org/model" },
];

const CPU_IMAGE_PREPARATION: &[NamedJob] = &[
    NamedJob { name: "webdataset-shard", step: "python", command: "python make_shards.py --maxcount 10000" },
    NamedJob { name: "resize-images", step: "python", command: "python resize.py --size 512" },
    NamedJob { name: "extract-frames", step: "ffmpeg", command: "ffmpeg -i video.mp4 -vf fps=2 frames/%06d.jpg" },
];

const CPU_SEQUENCE_ANALYSIS: &[NamedJob] = &[
    NamedJob { name: "bwa-mem", step: "bwa", command: "bwa mem -t 16 ref.fa reads_1.fq reads_2.fq" },
    NamedJob { name: "fastqc", step: "fastqc", command: "fastqc -t 8 reads/*.fq.gz" },
    NamedJob { name: "samtools-sort", step: "samtools", command: "samtools sort -@ 8 -o sorted.bam aln.bam" },
    NamedJob { name: "blast-search", step: "blastp", command: "blastp -query q.fa -db nr -num_threads 16" },
    NamedJob { name: "hmmer-scan", step: "hmmscan", command: "hmmscan --cpu 8 Pfam-A.hmm seqs.fa" },
];

const CPU_CLIMATE_PREPARATION: &[NamedJob] = &[
    NamedJob { name: "preprocess-era5", step: "python", command: "python preprocess_era5.py --year $YEAR" },
    NamedJob { name: "convert-zarr", step: "python", command: "python nc2zarr.py --chunks 1,721,1440" },
    NamedJob { name: "cdo-regrid", step: "cdo", command: "cdo remapbil,r360x180 in.nc out.nc" },
];

const CPU_POST_PROCESSING: &[NamedJob] = &[
    NamedJob { name: "root-analysis", step: "root", command: "root -b -q analysis.C" },
    NamedJob { name: "mc-gen", step: "mc", command: "./mc --events 1000000" },
    NamedJob { name: "post-process", step: "python", command: "python postprocess.py" },
];

const LLM: FamilyJobs = FamilyJobs {
    short: [
        ShortJob {
            name: "eval_ckpt_{ckpt}",
            project: "llama3-8b",
            step: "python",
            command: "python eval.py --ckpt checkpoints/iter_{ckpt:07}",
        },
        ShortJob {
            name: "lm-eval-harness",
            project: "evals",
            step: "python",
            command: "python -m lm_eval --model hf --tasks mmlu,gsm8k --batch_size 16",
        },
        ShortJob {
            name: "vllm-bench",
            project: "serving",
            step: "python",
            command: "python benchmark_throughput.py --model Qwen2.5-7B --tp 1",
        },
        ShortJob {
            name: "convert_hf_ckpt",
            project: "llama3-8b",
            step: "python",
            command: "python convert_to_hf.py --iter {ckpt}",
        },
        ShortJob {
            name: "debug-fsdp",
            project: "llama3-8b",
            step: "torchrun",
            command: "torchrun --nproc_per_node=gpu train.py --debug --max_steps 50",
        },
        ShortJob {
            name: "tokenizer-test",
            project: "tokenizer",
            step: "python",
            command: "python test_tokenizer.py --vocab 65536",
        },
    ],
    array: [
        NamedJob { name: "hpo-lr-sweep", step: "python", command: "python train.py --lr_idx $SLURM_ARRAY_TASK_ID" },
        NamedJob { name: "eval-shard", step: "python", command: "python eval_shard.py --shard $SLURM_ARRAY_TASK_ID" },
        NamedJob { name: "prompt-sweep", step: "python", command: "python gen.py --prompt_set $SLURM_ARRAY_TASK_ID" },
    ],
    long: [
        NamedJob {
            name: "sft-llama3-8b",
            step: "torchrun",
            command: "torchrun --nproc_per_node=8 sft.py --config configs/sft_llama3_8b.yaml",
        },
        NamedJob { name: "lora-qwen2-7b", step: "python", command: "python lora.py --model Qwen2-7B --r 64" },
        NamedJob { name: "dpo-mistral-7b", step: "accelerate", command: "accelerate launch dpo.py --config dpo.yaml" },
        NamedJob { name: "distill-7b", step: "torchrun", command: "torchrun --nproc_per_node=8 distill.py" },
    ],
    training: &[
        TrainingRun {
            name: "llama3-70b-pretrain",
            command: "python -u pretrain_gpt.py --config configs/llama3_70b.yaml",
        },
        TrainingRun {
            name: "llama3-8b-pretrain",
            command: "python -u pretrain_gpt.py --config configs/llama3_8b.yaml",
        },
        TrainingRun { name: "qwen2.5-32b-sft", command: "python -u sft.py --config configs/qwen25_32b.yaml" },
        TrainingRun {
            name: "mixtral-8x7b-cpt",
            command: "python -u pretrain_gpt.py --config configs/mixtral_8x7b.yaml",
        },
        TrainingRun { name: "swallow-13b-cpt", command: "python -u pretrain_gpt.py --config configs/swallow_13b.yaml" },
        TrainingRun {
            name: "megatron-175b-bench",
            command: "python -u pretrain_gpt.py --config configs/gpt3_175b.yaml --train-iters 200",
        },
    ],
    cpu: CPU_DATA_PREPARATION,
};

const VISION: FamilyJobs = FamilyJobs {
    short: [
        ShortJob {
            name: "eval_ckpt_{ckpt}",
            project: "vit-l",
            step: "python",
            command: "python eval.py --ckpt out/ckpt_{ckpt}.pt",
        },
        ShortJob {
            name: "resnet50-debug",
            project: "resnet50",
            step: "python",
            command: "python train.py --arch resnet50 --epochs 1 --debug",
        },
        ShortJob {
            name: "yolov8-val",
            project: "yolov8",
            step: "yolo",
            command: "yolo val model=runs/train/weights/best.pt data=coco.yaml",
        },
        ShortJob {
            name: "sam-infer",
            project: "sam",
            step: "python",
            command: "python infer.py --checkpoint sam_vit_h.pth",
        },
        ShortJob {
            name: "coco-eval",
            project: "detr",
            step: "python",
            command: "python eval_coco.py --ckpt ckpt_{ckpt}.pth",
        },
        ShortJob {
            name: "diffusion-sample",
            project: "sdxl",
            step: "python",
            command: "python sample.py --steps 50 --n 64",
        },
    ],
    array: [
        NamedJob {
            name: "resnet50-sweep",
            step: "python",
            command: "python train.py --arch resnet50 --cfg sweep/$SLURM_ARRAY_TASK_ID.yaml",
        },
        NamedJob { name: "augment-ablation", step: "python", command: "python train.py --aug $SLURM_ARRAY_TASK_ID" },
        NamedJob { name: "vit-hpo", step: "python", command: "python hpo.py --trial $SLURM_ARRAY_TASK_ID" },
    ],
    long: [
        NamedJob { name: "dreambooth", step: "accelerate", command: "accelerate launch train_dreambooth.py" },
        NamedJob { name: "train_unet", step: "torchrun", command: "torchrun --nproc_per_node=8 train_unet.py" },
        NamedJob { name: "vit-b-finetune", step: "python", command: "python finetune.py --model vit_b_16" },
        NamedJob {
            name: "detr-train",
            step: "torchrun",
            command: "torchrun --nproc_per_node=8 main.py --coco_path /lustre/datasets/coco",
        },
    ],
    training: &[
        TrainingRun { name: "vit-h-14-pretrain", command: "python -u main_pretrain.py --model vit_huge_patch14" },
        TrainingRun { name: "clip-vitl-train", command: "python -u -m open_clip_train.main --model ViT-L-14" },
        TrainingRun { name: "sam2-train", command: "python -u training/train.py -c configs/sam2_hiera_l.yaml" },
    ],
    cpu: CPU_IMAGE_PREPARATION,
};

const BIO: FamilyJobs = FamilyJobs {
    short: [
        ShortJob {
            name: "alphafold2-predict",
            project: "alphafold",
            step: "python",
            command: "python run_alphafold.py --fasta_paths=query.fasta --model_preset=monomer",
        },
        ShortJob {
            name: "esmfold-infer",
            project: "esm",
            step: "python",
            command: "python esmfold_infer.py -i seqs.fasta -o pdb/",
        },
        ShortJob {
            name: "colabfold",
            project: "colabfold",
            step: "colabfold_batch",
            command: "colabfold_batch input.fasta out/",
        },
        ShortJob {
            name: "rfdiffusion-test",
            project: "rfdiffusion",
            step: "python",
            command: "python run_inference.py inference.num_designs=4",
        },
        ShortJob {
            name: "eval_ckpt_{ckpt}",
            project: "esm2",
            step: "python",
            command: "python eval.py --ckpt ckpt_{ckpt}.pt",
        },
        ShortJob {
            name: "gromacs-test",
            project: "md",
            step: "gmx_mpi",
            command: "gmx_mpi mdrun -deffnm test -nb gpu -nsteps 10000",
        },
    ],
    array: [
        NamedJob {
            name: "alphafold-batch",
            step: "python",
            command: "python run_alphafold.py --fasta_paths=batch/$SLURM_ARRAY_TASK_ID.fasta",
        },
        NamedJob {
            name: "md-replica",
            step: "gmx_mpi",
            command: "gmx_mpi mdrun -deffnm rep$SLURM_ARRAY_TASK_ID -nb gpu",
        },
        NamedJob { name: "docking-screen", step: "python", command: "python dock.py --chunk $SLURM_ARRAY_TASK_ID" },
    ],
    long: [
        NamedJob {
            name: "gromacs-md",
            step: "gmx_mpi",
            command: "gmx_mpi mdrun -deffnm prod -nb gpu -pme gpu -bonded gpu",
        },
        NamedJob { name: "esm2-finetune", step: "torchrun", command: "torchrun --nproc_per_node=8 finetune_esm2.py" },
        NamedJob { name: "openfold-train", step: "python", command: "python train_openfold.py --precision bf16" },
        NamedJob { name: "amber-pmemd", step: "pmemd.cuda", command: "pmemd.cuda -O -i prod.in -o prod.out" },
    ],
    training: &[
        TrainingRun { name: "esm2-3b-train", command: "python -u train_esm2.py --model esm2_t36_3B" },
        TrainingRun { name: "openfold-multinode", command: "python -u train_openfold.py --num_nodes $SLURM_NNODES" },
    ],
    cpu: CPU_SEQUENCE_ANALYSIS,
};

const CLIMATE: FamilyJobs = FamilyJobs {
    short: [
        ShortJob {
            name: "fourcastnet-infer",
            project: "fourcastnet",
            step: "python",
            command: "python inference.py --config afno_backbone",
        },
        ShortJob { name: "era5-eval", project: "era5", step: "python", command: "python evaluate.py --year 2020" },
        ShortJob {
            name: "graphcast-rollout",
            project: "graphcast",
            step: "python",
            command: "python rollout.py --steps 40",
        },
        ShortJob {
            name: "eval_ckpt_{ckpt}",
            project: "fourcastnet",
            step: "python",
            command: "python eval.py --ckpt ckpt_{ckpt}.tar",
        },
        ShortJob { name: "wrf-gpu-test", project: "wrf", step: "wrf.exe", command: "wrf.exe" },
        ShortJob { name: "unet-debug", project: "downscale", step: "python", command: "python train.py --debug" },
    ],
    array: [
        NamedJob { name: "wrf-ens", step: "wrf.exe", command: "wrf.exe" },
        NamedJob { name: "ens-member", step: "python", command: "python rollout.py --member $SLURM_ARRAY_TASK_ID" },
        NamedJob { name: "downscale-tile", step: "python", command: "python downscale.py --tile $SLURM_ARRAY_TASK_ID" },
    ],
    long: [
        NamedJob {
            name: "fourcastnet-finetune",
            step: "torchrun",
            command: "torchrun --nproc_per_node=8 train.py --config afno_finetune",
        },
        NamedJob { name: "unet-downscale", step: "python", command: "python train_downscale.py" },
        NamedJob { name: "graphcast-finetune", step: "python", command: "python train.py --resolution 1.0" },
        NamedJob { name: "wrf-gpu", step: "wrf.exe", command: "wrf.exe" },
    ],
    training: &[
        TrainingRun { name: "fourcastnet-train", command: "python -u train.py --config afno_backbone_26ch" },
        TrainingRun { name: "graphcast-train", command: "python -u train.py --resolution 0.25" },
    ],
    cpu: CPU_CLIMATE_PREPARATION,
};

const PHYSICS: FamilyJobs = FamilyJobs {
    short: [
        ShortJob { name: "lqcd-test", project: "lqcd", step: "hmc", command: "./hmc --input test.xml" },
        ShortJob { name: "pinn-debug", project: "pinn", step: "python", command: "python train_pinn.py --epochs 10" },
        ShortJob { name: "lammps-gpu-test", project: "lammps", step: "lmp", command: "lmp -k on g 1 -sf kk -in in.lj" },
        ShortJob { name: "cuda-bench", project: "bench", step: "nvbandwidth", command: "nvbandwidth" },
        ShortJob {
            name: "eval_ckpt_{ckpt}",
            project: "pinn",
            step: "python",
            command: "python eval.py --ckpt ckpt_{ckpt}.pt",
        },
        ShortJob { name: "qmc-test", project: "qmc", step: "qmcpack", command: "qmcpack input.xml" },
    ],
    array: [
        NamedJob { name: "param-scan", step: "python", command: "python scan.py --point $SLURM_ARRAY_TASK_ID" },
        NamedJob { name: "mc-seed", step: "mc", command: "./mc --seed $SLURM_ARRAY_TASK_ID" },
        NamedJob {
            name: "md-replica",
            step: "lmp",
            command: "lmp -k on g 1 -sf kk -in in.rep -var r $SLURM_ARRAY_TASK_ID",
        },
    ],
    long: [
        NamedJob { name: "lattice-qcd-hmc", step: "hmc", command: "./hmc --input ensemble_a.xml" },
        NamedJob { name: "pinn-train", step: "python", command: "python train_pinn.py --epochs 2000" },
        NamedJob { name: "lammps-gpu", step: "lmp", command: "lmp -k on g 8 -sf kk -in in.production" },
        NamedJob { name: "qmcpack-dmc", step: "qmcpack", command: "qmcpack dmc.xml" },
    ],
    training: &[
        TrainingRun { name: "lqcd-multinode", command: "./hmc --input ensemble_b.xml --grid 4.4.4.8" },
        TrainingRun { name: "pinn-large", command: "python -u train_pinn.py --distributed" },
    ],
    cpu: CPU_POST_PROCESSING,
};

const ML: FamilyJobs = FamilyJobs {
    short: [
        ShortJob {
            name: "eval_ckpt_{ckpt}",
            project: "moe",
            step: "python",
            command: "python eval.py --ckpt ckpt_{ckpt}.pt",
        },
        ShortJob { name: "rlhf-debug", project: "rlhf", step: "python", command: "python ppo.py --debug --steps 20" },
        ShortJob {
            name: "nsys-profile",
            project: "profiling",
            step: "nsys",
            command: "nsys profile -o prof python train.py --max_steps 20",
        },
        ShortJob {
            name: "sanity-check",
            project: "infra",
            step: "python",
            command: "python -c import torch; print(torch.cuda.device_count())",
        },
        ShortJob { name: "gnn-debug", project: "gnn", step: "python", command: "python train_gnn.py --epochs 2" },
        ShortJob { name: "mmlu-eval", project: "evals", step: "python", command: "python -m lm_eval --tasks mmlu" },
    ],
    array: [
        NamedJob { name: "ablation-grid", step: "python", command: "python train.py --grid $SLURM_ARRAY_TASK_ID" },
        NamedJob { name: "eval-shard", step: "python", command: "python eval_shard.py --shard $SLURM_ARRAY_TASK_ID" },
        NamedJob { name: "seed-sweep", step: "python", command: "python train.py --seed $SLURM_ARRAY_TASK_ID" },
    ],
    long: [
        NamedJob { name: "ppo-rlhf", step: "python", command: "python ppo.py --config ppo_7b.yaml" },
        NamedJob { name: "train-gnn", step: "python", command: "python train_gnn.py --dataset ogbn-papers100M" },
        NamedJob { name: "moe-small", step: "torchrun", command: "torchrun --nproc_per_node=8 train_moe.py" },
        NamedJob { name: "sdxl-finetune", step: "accelerate", command: "accelerate launch train_sdxl.py" },
    ],
    training: &[
        TrainingRun { name: "ddp-bert-large", command: "python -u run_pretraining.py --model bert-large" },
        TrainingRun { name: "moe-ablation", command: "python -u train_moe.py --experts 64" },
        TrainingRun { name: "sdxl-train", command: "python -u train_sdxl.py --distributed" },
    ],
    cpu: CPU_DATA_PREPARATION,
};
