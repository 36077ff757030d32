//! Expands Slurm hostlist expressions (`gpu[001-004,010],login1`) into host names, for placing jobs on
//! node rows. Expansion only: the server owns the full grammar; the front end needs just this direction.

/// The most hosts one expression may expand to; a malformed `n[0-999999999]` must not exhaust memory.
pub const MAX_HOSTS: usize = 100_000;

/// The hosts of `expr` in order. `None assigned` and empty strings give no hosts; a malformed item is
/// kept verbatim, so a job still shows somewhere rather than vanishing.
pub fn expand(expr: &str) -> Vec<String> {
    let expr = expr.trim();
    if expr.is_empty() || expr.eq_ignore_ascii_case("none assigned") || expr == "(null)" {
        return Vec::new();
    }
    let mut hosts = Vec::new();
    for item in split_top_level(expr) {
        match expand_item(item) {
            Some(expanded) => hosts.extend(expanded),
            None => hosts.push(item.to_string()),
        }
        if hosts.len() > MAX_HOSTS {
            hosts.truncate(MAX_HOSTS);
            break;
        }
    }
    hosts
}

/// Splits on commas outside brackets.
fn split_top_level(expr: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut begin = 0;
    for (index, character) in expr.char_indices() {
        match character {
            '[' => depth += 1,
            ']' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(&expr[begin..index]);
                begin = index + 1;
            }
            _ => {}
        }
    }
    items.push(&expr[begin..]);
    items.into_iter().map(str::trim).filter(|item| !item.is_empty()).collect()
}

/// `rack[1-2]-gpu[01-02]` → the cartesian product, left to right. `None` when malformed.
fn expand_item(item: &str) -> Option<Vec<String>> {
    let Some(open) = item.find('[') else {
        return Some(vec![item.to_string()]);
    };
    let close = open + item[open..].find(']')?;
    let prefix = &item[..open];
    let tails = expand_item(&item[close + 1..])?;
    let mut hosts = Vec::new();
    for range in item[open + 1..close].split(',') {
        let (low, high) = range.split_once('-').unwrap_or((range, range));
        let width = low.len();
        let low_value: u64 = low.parse().ok()?;
        let high_value: u64 = high.parse().ok()?;
        if high_value < low_value || (high_value - low_value) as usize > MAX_HOSTS {
            return None;
        }
        for value in low_value..=high_value {
            for tail in &tails {
                hosts.push(format!("{prefix}{value:0width$}{tail}"));
            }
            if hosts.len() > MAX_HOSTS {
                return Some(hosts);
            }
        }
    }
    Some(hosts)
}

#[cfg(test)]
mod tests {
    use super::expand;

    #[test]
    fn expands_ranges_lists_and_padding() {
        assert_eq!(expand("gpu[001-003,010]"), ["gpu001", "gpu002", "gpu003", "gpu010"]);
        assert_eq!(expand("n[1-2],login1"), ["n1", "n2", "login1"]);
        assert_eq!(expand("n3"), ["n3"]);
    }

    #[test]
    fn expands_several_bracket_groups_left_to_right() {
        assert_eq!(expand("r[1-2]-g[1-2]"), ["r1-g1", "r1-g2", "r2-g1", "r2-g2"]);
    }

    #[test]
    fn unassigned_gives_nothing_and_malformed_items_stay_verbatim() {
        assert!(expand("None assigned").is_empty());
        assert!(expand("").is_empty());
        assert_eq!(expand("n[3-1],n5"), ["n[3-1]", "n5"]);
        assert_eq!(expand("n[0-999999999]").len(), 1);
    }
}
