//! The leader's waiting list as followers read it (replicas on PostgreSQL): one row that
//! the leader replaces, fenced by its lease like its other writes (see
//! `admission::published`).

use super::*;

impl JobStore {
    /// Replaces the published waiting list with `body`; live pages on every replica refresh.
    pub async fn publish_waiting(&self, at_us: i64, body: &str) -> Result<()> {
        let _turn = self.write_turn().await;
        let mut tx = self.db.pool.begin().await?;
        if let Some(epoch) = self.fence {
            check_fence(&mut tx, epoch).await?;
        }
        sqlx::query("UPDATE waiting_view SET epoch = $1, at_us = $2, body = $3 WHERE id = 1")
            .bind(self.fence.unwrap_or(0))
            .bind(at_us)
            .bind(body)
            .execute(&mut *tx)
            .await?;
        notify_changed(&mut tx, self.db.kind).await?;
        tx.commit().await?;
        Ok(())
    }

    /// The waiting list the leader published last (empty before the first).
    pub async fn published_waiting(&self) -> Result<String> {
        let body: Option<String> = sqlx::query_scalar("SELECT body FROM waiting_view WHERE id = 1").fetch_optional(&self.db.pool).await?;
        Ok(body.unwrap_or_default())
    }
}
