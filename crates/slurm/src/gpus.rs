//! A job's GPUs per node. slurmdbd keeps only a job's total (`AllocTRES` `gres/gpu=16`); the GPUs on
//! each node follow from it exactly when it splits evenly, since `--gres=gpu:N` asks per node.

/// A job's GPUs on each of its `nodes` nodes, where the total tells it exactly: all of them on one
/// node, the even share when the total divides; else `None`.
pub fn exact_gpus_per_node(total: u64, nodes: usize) -> Option<u64> {
    match nodes {
        0 => None,
        1 => Some(total),
        n => total.is_multiple_of(n as u64).then_some(total / n as u64),
    }
}

/// The exact share where there is one, else the share rounded up (at least what the busiest node held).
pub fn gpus_per_node_rounded_up(total: u64, nodes: usize) -> u64 {
    exact_gpus_per_node(total, nodes).unwrap_or_else(|| total.div_ceil(nodes.max(1) as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpus_per_node_are_exact_only_when_the_total_splits() {
        assert_eq!(exact_gpus_per_node(3, 1), Some(3));
        assert_eq!(exact_gpus_per_node(8, 2), Some(4));
        assert_eq!(exact_gpus_per_node(3, 2), None);
        assert_eq!(exact_gpus_per_node(4, 0), None);
        assert_eq!((gpus_per_node_rounded_up(3, 2), gpus_per_node_rounded_up(4, 0)), (2, 4));
    }
}
