//! Where a batch job's own output went: its standard output and error files as Slurm named them, from
//! slurmdbd's `std_out`/`std_err` (Slurm ≥ 24.05), else the `--output`/`--error` options of its submit
//! line or its script's `#SBATCH` lines, else Slurm's default `slurm-%j.out` in its working directory,
//! with Slurm's filename patterns (`%j`, `%A_%a`, `%x`, `%u`, `%N`, `%5j`, …) filled in.

use std::path::{Path, PathBuf};

/// Which stream a file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output, and standard error too where no `--error` was given.
    Output,
    Error,
}

/// Where the job's file name came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Named {
    /// slurmdbd's record of the job (Slurm ≥ 24.05).
    Slurmdbd,
    SubmitLine,
    Script,
    /// Slurm's default, no option given.
    Default,
}

/// What the patterns of a job's file names are filled with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputJob {
    pub job_id: u32,
    /// The array's job id and this task's index, for an array task.
    pub array: Option<(u32, u32)>,
    pub user: String,
    pub job_name: String,
    /// The first node of the allocation (`%N` of the batch step).
    pub first_node: String,
    pub work_dir: String,
}

/// One file of a job's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputFile {
    pub stream: Stream,
    /// Absolute where the working directory made it so; `None` for `/dev/null` (discarded).
    pub path: Option<PathBuf>,
    pub named: Named,
}

/// The `--output`/`--error` values of an `sbatch` command line or of `#SBATCH` lines: `-o F`, `-oF`,
/// `--output=F`, `--output F`, the same for `-e`/`--error`.
pub fn options<'a>(words: impl IntoIterator<Item = &'a str>) -> (Option<String>, Option<String>) {
    let (mut output, mut error) = (None, None);
    let mut words = words.into_iter();
    while let Some(word) = words.next() {
        let (target, value) = match word {
            "-o" | "--output" => (&mut output, words.next().map(str::to_string)),
            "-e" | "--error" => (&mut error, words.next().map(str::to_string)),
            _ => match word.split_once('=') {
                Some(("--output", value)) => (&mut output, Some(value.to_string())),
                Some(("--error", value)) => (&mut error, Some(value.to_string())),
                _ if word.starts_with("-o") && word.len() > 2 => (&mut output, Some(word[2..].to_string())),
                _ if word.starts_with("-e") && word.len() > 2 && !word.starts_with("--") => {
                    (&mut error, Some(word[2..].to_string()))
                }
                _ => continue,
            },
        };
        if let Some(value) = value {
            *target = Some(unquote(&value));
        }
    }
    (output, error)
}

fn unquote(value: &str) -> String {
    value.trim_matches(|c| c == '"' || c == '\'').to_string()
}

/// The words of a submit line, split as a shell would for plain and quoted words.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let (mut word, mut quote, mut any) = (String::new(), None::<char>, false);
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '"' | '\'') => (quote, any) = (Some(c), true),
            (None, c) if c.is_whitespace() => {
                if any || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                any = false;
            }
            (None, c) => word.push(c),
        }
    }
    if any || !word.is_empty() {
        words.push(word);
    }
    words
}

/// The `#SBATCH` options of a batch script: its comment lines before the first command.
fn script_words(script: &str) -> Vec<String> {
    script
        .lines()
        .skip_while(|line| line.starts_with("#!"))
        .take_while(|line| line.trim().is_empty() || line.trim_start().starts_with('#'))
        .filter_map(|line| line.trim_start().strip_prefix("#SBATCH"))
        .flat_map(shell_words)
        .collect()
}

/// A Slurm filename pattern filled in for `job`'s batch step: `%%`, `%A`, `%a`, `%j`, `%J`, `%u`, `%x`,
/// `%N`, `%n`, `%t`, `%s`, with a width (`%5j`) zero-padding a number. Unknown letters stay as written.
pub fn expand(pattern: &str, job: &OutputJob) -> String {
    let mut out = String::new();
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut width = String::new();
        while let Some(digit) = chars.peek().filter(|d| d.is_ascii_digit()) {
            width.push(*digit);
            chars.next();
        }
        let width: usize = width.parse().unwrap_or(0);
        let number = |n: u32| format!("{n:0width$}");
        match chars.next() {
            Some('%') => out.push('%'),
            Some('j') => out.push_str(&number(job.job_id)),
            Some('J') => out.push_str(&format!("{}.batch", number(job.job_id))),
            Some('A') => out.push_str(&number(job.array.map_or(job.job_id, |(array, _)| array))),
            Some('a') => out.push_str(&number(job.array.map_or(u32::MAX, |(_, task)| task))),
            Some('u') => out.push_str(&job.user),
            Some('x') => out.push_str(&job.job_name),
            Some('N') => out.push_str(&job.first_node),
            Some('n' | 't') => out.push_str(&number(0)),
            Some('s') => out.push_str("batch"),
            Some(other) => {
                out.push('%');
                out.push(other);
            }
            None => out.push('%'),
        }
    }
    out
}

/// The job's output files, best source first: slurmdbd's record, the submit line, the script, Slurm's
/// default. Standard error is a file of its own only where it was named apart.
pub fn files(
    job: &OutputJob,
    recorded: Option<(&str, &str)>,
    submit_line: &str,
    script: Option<&str>,
) -> Vec<OutputFile> {
    let submit = shell_words(submit_line);
    let from_line = options(submit.iter().map(String::as_str));
    let from_script = script.map(|script| {
        let words = script_words(script);
        options(words.iter().map(String::as_str))
    });
    let pick = |stream: Stream| -> Option<(String, Named)> {
        let recorded = recorded.map(|(out, err)| if stream == Stream::Output { out } else { err });
        let of = |(output, error): &(Option<String>, Option<String>)| {
            if stream == Stream::Output { output.clone() } else { error.clone() }
        };
        recorded
            .filter(|path| !path.is_empty())
            .map(|path| (path.to_string(), Named::Slurmdbd))
            .or_else(|| of(&from_line).map(|path| (path, Named::SubmitLine)))
            .or_else(|| from_script.as_ref().and_then(of).map(|path| (path, Named::Script)))
    };
    let default = if job.array.is_some() { "slurm-%A_%a.out" } else { "slurm-%j.out" };
    let (output, named) = pick(Stream::Output).unwrap_or((default.to_string(), Named::Default));
    let mut out = vec![OutputFile { stream: Stream::Output, path: resolve(&output, job), named }];
    if let Some((error, named)) = pick(Stream::Error) {
        let path = resolve(&error, job);
        if path != out[0].path {
            out.push(OutputFile { stream: Stream::Error, path, named });
        }
    }
    out
}

/// A pattern filled in and made absolute against the working directory; `None` for `/dev/null`.
fn resolve(pattern: &str, job: &OutputJob) -> Option<PathBuf> {
    let name = expand(pattern, job);
    if name == "/dev/null" || name.is_empty() {
        return None;
    }
    let path = Path::new(&name);
    Some(if path.is_absolute() { path.to_path_buf() } else { Path::new(&job.work_dir).join(path) })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> OutputJob {
        OutputJob {
            job_id: 1198329,
            array: None,
            user: "alice".into(),
            job_name: "llama-pretrain".into(),
            first_node: "gpu006".into(),
            work_dir: "/lustre/alice/run".into(),
        }
    }

    #[test]
    fn patterns_fill_in_as_slurm_does() {
        assert_eq!(expand("%x-%j.out", &job()), "llama-pretrain-1198329.out");
        assert_eq!(expand("logs/%u/%10j.%N.err", &job()), "logs/alice/0001198329.gpu006.err");
        let task = OutputJob { job_id: 1200937, array: Some((1200900, 29)), ..job() };
        assert_eq!(expand("slurm-%A_%a.out", &task), "slurm-1200900_29.out");
        assert_eq!(expand("100%% %q", &job()), "100% %q");
    }

    #[test]
    fn the_submit_line_beats_the_script_and_the_default_comes_last() {
        let line = "sbatch -J x -o 'out/%j.log' --error=err/%j.log train.sh";
        let got = files(&job(), None, line, Some("#!/bin/bash\n#SBATCH --output=never.log\npython train.py\n"));
        assert_eq!(got[0].path.as_deref(), Some(Path::new("/lustre/alice/run/out/1198329.log")));
        assert_eq!(got[0].named, Named::SubmitLine);
        assert_eq!(got[1].path.as_deref(), Some(Path::new("/lustre/alice/run/err/1198329.log")));
        let script =
            "#!/bin/bash\n#SBATCH -N 2\n#SBATCH --output=/scratch/%u/%x.%j\n\nsrun python train.py\n#SBATCH -e late\n";
        let got = files(&job(), None, "sbatch train.sh", Some(script));
        assert_eq!(got.len(), 1, "no --error before the first command: one file for both");
        assert_eq!(got[0].path.as_deref(), Some(Path::new("/scratch/alice/llama-pretrain.1198329")));
        assert_eq!(got[0].named, Named::Script);
        let got = files(&job(), None, "sbatch train.sh", None);
        assert_eq!(
            (got[0].path.as_deref(), got[0].named),
            (Some(Path::new("/lustre/alice/run/slurm-1198329.out")), Named::Default)
        );
        let recorded = files(&job(), Some(("/home/alice/a.out", "/home/alice/a.err")), "sbatch -o x train.sh", None);
        assert_eq!((recorded[0].named, recorded.len()), (Named::Slurmdbd, 2));
    }

    #[test]
    fn dev_null_is_discarded_and_short_options_read_joined() {
        let got = files(&job(), None, "sbatch -o/dev/null -e /dev/null --wrap 'sleep 3; exit 1'", None);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].path, None);
        assert_eq!(options(["-oa.out", "-eb.err"]), (Some("a.out".into()), Some("b.err".into())));
    }
}
