//! What showback reads of slurmdbd beyond the window's jobs: the account tree (account associations'
//! `parent_acct`), which sub-accounts roll up into, as `sreport` rolls them up.

use super::{SlurmDbd, SlurmDbdError};

impl SlurmDbd {
    /// Every account with its parent account (`root`'s is empty), deleted accounts too (their jobs
    /// still count); a live association wins over a deleted one of the same account.
    pub async fn account_parents(&self) -> Result<Vec<(String, String)>, SlurmDbdError> {
        let sql = format!(
            "SELECT acct, parent_acct FROM {} WHERE user = '' ORDER BY deleted DESC, id_assoc",
            self.cluster.table("assoc_table")
        );
        Ok(sqlx::query_as(&sql).fetch_all(&self.pool).await?)
    }
}
