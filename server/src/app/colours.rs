//! The pages' stable colours: each user and account of a cluster a palette slot, from the order
//! slurmdbd first associated them, told only for what the viewer may see.

use super::{App, AppError, Viewer};
use crate::domain::colours::{ColourSlots, colour_slots};

impl App {
    /// The palette slots (of `slots`) of the users and accounts `viewer` may see on `cluster`: the same
    /// slot for the same user on every page, for every viewer. A viewer who may see no job gets none.
    pub async fn colour_slots(
        &self,
        viewer: &Viewer,
        cluster: Option<&str>,
        slots: u32,
    ) -> Result<ColourSlots, AppError> {
        let reader = self.cluster(cluster)?;
        let scope = self.scope(viewer, reader).await?;
        let associations = reader.associations_in_order().await?;
        Ok(colour_slots(&associations, slots, &scope))
    }
}
