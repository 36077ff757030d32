//! What the generator reads from slurmdbd before it writes: TRES and QOS ids, and the user associations with
//! their unix ids.

use std::collections::BTreeMap;

use anyhow::{Context, Result, ensure};
use sqlx::{MySqlPool, Row};

#[derive(Debug, Clone)]
pub(super) struct TresIds {
    pub(super) cpu: u32,
    pub(super) mem: u32,
    pub(super) energy: u32,
    pub(super) node: u32,
    pub(super) billing: u32,
    pub(super) disk: u32,
    pub(super) vmem: u32,
    pub(super) pages: u32,
    pub(super) gpu: u32,
}

#[derive(Debug, Clone)]
pub(super) struct UserAssociation {
    pub(super) id_assoc: u32,
    pub(super) user: String,
    pub(super) acct: String,
    pub(super) is_def: bool,
    pub(super) uid: u32,
    pub(super) gid: u32,
}

#[derive(Debug, Clone)]
pub(super) struct ClusterContext {
    pub(super) tres: TresIds,
    pub(super) qos_normal: u32,
    pub(super) qos_high: Option<u32>,
    pub(super) qos_debug: Option<u32>,
    pub(super) qos_low: Option<u32>,
    pub(super) users: Vec<UserAssociation>,
}

pub(super) async fn load_context(pool: &MySqlPool, cluster: &str) -> Result<ClusterContext> {
    let rows = sqlx::query(
        "SELECT CAST(id AS UNSIGNED) AS id, CAST(type AS CHAR) AS t, CAST(name AS CHAR) AS n FROM tres_table WHERE deleted = 0",
    )
    .fetch_all(pool)
    .await
    .context("reading tres_table")?;
    let mut tres_map: BTreeMap<(String, String), u32> = BTreeMap::new();
    for row in &rows {
        let id: u64 = row.try_get("id")?;
        let id = u32::try_from(id)?;
        let tres_type: String = row.try_get("t")?;
        let tres_name: String = row.try_get("n")?;
        tres_map.insert((tres_type, tres_name), id);
    }
    let tres_id = |tres_type: &str, tres_name: &str| -> Result<u32> {
        tres_map
            .get(&(tres_type.to_string(), tres_name.to_string()))
            .copied()
            .with_context(|| format!("tres_table has no {tres_type}/{tres_name}"))
    };
    let tres = TresIds {
        cpu: tres_id("cpu", "")?,
        mem: tres_id("mem", "")?,
        energy: tres_id("energy", "")?,
        node: tres_id("node", "")?,
        billing: tres_id("billing", "")?,
        disk: tres_id("fs", "disk")?,
        vmem: tres_id("vmem", "")?,
        pages: tres_id("pages", "")?,
        gpu: tres_id("gres", "gpu")?,
    };

    let rows = sqlx::query(
        "SELECT CAST(id AS UNSIGNED) AS id, CAST(name AS CHAR) AS n FROM qos_table WHERE deleted = 0 ORDER BY id",
    )
    .fetch_all(pool)
    .await
    .context("reading qos_table")?;
    let mut qos: Vec<(u32, String)> = Vec::new();
    for row in &rows {
        let id: u64 = row.try_get("id")?;
        qos.push((u32::try_from(id)?, row.try_get("n")?));
    }
    let find = |name: &str| qos.iter().find(|(_, qos_name)| qos_name == name).map(|(id, _)| *id);
    let qos_normal = find("normal").or_else(|| qos.first().map(|(id, _)| *id)).context("qos_table is empty")?;

    let sql = format!(
        "SELECT CAST(id_assoc AS UNSIGNED) AS id_assoc, CAST(user AS CHAR) AS u, CAST(acct AS CHAR) AS a, \
         CAST(is_def AS SIGNED) AS is_def \
         FROM `{cluster}_assoc_table` \
         WHERE deleted = 0 AND `partition` = '' AND user <> '' AND user <> 'root' ORDER BY id_assoc"
    );
    let rows = sqlx::query(&sql).fetch_all(pool).await.with_context(|| format!("reading {cluster}_assoc_table"))?;
    let mut users = Vec::new();
    for row in &rows {
        let is_def: i64 = row.try_get("is_def")?;
        let id_assoc: u64 = row.try_get("id_assoc")?;
        users.push(UserAssociation {
            id_assoc: u32::try_from(id_assoc)?,
            user: row.try_get("u")?,
            acct: row.try_get("a")?,
            is_def: is_def != 0,
            uid: 0,
            gid: 0,
        });
    }
    ensure!(!users.is_empty(), "{cluster}_assoc_table has no user associations");
    assign_uids(&mut users);
    Ok(ClusterContext {
        tres,
        qos_normal,
        qos_high: find("high"),
        qos_debug: find("debug"),
        qos_low: find("low").or_else(|| find("scavenger")),
        users,
    })
}

pub(super) fn assign_uids(users: &mut [UserAssociation]) {
    let mut names: Vec<String> = users.iter().map(|user| user.user.clone()).collect();
    names.sort();
    names.dedup();
    let mut found: BTreeMap<String, (u32, u32)> = BTreeMap::new();
    if let Ok(output) = std::process::Command::new("getent").arg("passwd").args(&names).output() {
        for line in String::from_utf8_lossy(&output.stdout).lines() {
            let fields: Vec<&str> = line.split(':').collect();
            if fields.len() >= 4
                && let (Ok(uid), Ok(gid)) = (fields[2].parse::<u32>(), fields[3].parse::<u32>())
            {
                found.insert(fields[0].to_string(), (uid, gid));
            }
        }
    }
    for user in users.iter_mut() {
        let (uid, gid) = found.get(&user.user).copied().unwrap_or_else(|| {
            let uid = fallback_uid(&user.user, &names);
            (uid, uid)
        });
        user.uid = uid;
        user.gid = gid;
    }
}

pub(super) fn fallback_uid(name: &str, all_names: &[String]) -> u32 {
    match name {
        "alice" => 1001,
        "bob" => 1002,
        "carol" => 1003,
        "dave" => 1004,
        _ => {
            if let Some(number) = name.strip_prefix('u').and_then(|digits| digits.parse::<u32>().ok())
                && number < 1000
            {
                return 2000 + number;
            }
            3000 + all_names.iter().position(|other| other == name).unwrap_or(0) as u32
        }
    }
}

/// A cluster without a database: 14 users (`u01`..`u14`) spread over 7 accounts of every research family,
/// the lab's TRES ids, QOS `normal` and `high`. The tests and `slurmlens-dev bench history` build plans
/// against it.
pub(super) fn synthetic_context() -> ClusterContext {
    let accounts = ["llm", "ml", "ml-vision", "vision", "bio", "climate", "physics"];
    let users = (0..14u32)
        .map(|index| UserAssociation {
            id_assoc: 10 + index,
            user: format!("u{:02}", index + 1),
            acct: accounts[(index as usize) % accounts.len()].to_string(),
            is_def: true,
            uid: 2001 + index,
            gid: 2001 + index,
        })
        .collect();
    ClusterContext {
        tres: TresIds { cpu: 1, mem: 2, energy: 3, node: 4, billing: 5, disk: 6, vmem: 7, pages: 8, gpu: 1001 },
        qos_normal: 1,
        qos_high: Some(2),
        qos_debug: None,
        qos_low: None,
        users,
    }
}
