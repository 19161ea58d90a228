//! Moving sessions' `time.updated` forward in place, so that a write of the whole row made
//! meanwhile (a new title) is neither lost nor overwritten.

use sqlx::SqliteConnection;
use taskforce_agents::id::SessionId;
use taskforce_agents::model::Session;

use crate::store::StoreError;
use crate::store::rows::{database, decode_session, to_sql};

/// Sets each session's `time_updated` to its time unless it is later already (the payload is
/// not rewritten: reads take the time from that column), in statements of a few fixed
/// row counts padded with NULL rows (so that a few statements are cached, not one per count);
/// answers the sessions as stored after (those not stored are left out). Each statement
/// commits on its own: a touch that is lost leaves an older time, never a wrong one.
pub(super) async fn touch(
    conn: &mut SqliteConnection,
    touches: Vec<(SessionId, u64)>,
) -> Result<Vec<Session>, StoreError> {
    let mut out = Vec::with_capacity(touches.len());
    let mut rest = touches.as_slice();
    for (taken, chunk) in chunks(touches.len()) {
        let (head, tail) = rest.split_at(taken);
        rest = tail;
        let values = vec!["(?, ?)"; CHUNKS[chunk]].join(", ");
        let sql = format!(
            "UPDATE session SET time_updated = max(session.time_updated, t.at) \
             FROM (SELECT column1 AS id, max(column2) AS at FROM (VALUES {values}) \
                   WHERE column1 IS NOT NULL GROUP BY column1) AS t \
             WHERE session.id = t.id \
             RETURNING id, data, time_updated"
        );
        let mut query = sqlx::query(&sql);
        for (id, at) in head {
            query = query.bind(id.as_str()).bind(to_sql(*at));
        }
        for _ in taken..CHUNKS[chunk] {
            query = query.bind(None::<&str>).bind(None::<i64>);
        }
        let rows = query
            .fetch_all(&mut *conn)
            .await
            .map_err(database("cannot update the sessions' times"))?;
        for row in &rows {
            out.push(decode_session(row)?);
        }
    }
    Ok(out)
}

/// The row counts of the touches' statements: rows go in statements
/// of the largest, and the rest in the smallest that holds it, padded; so a handful of
/// statements are cached, not one per count.
pub(super) const CHUNKS: [usize; 5] = [1, 4, 16, 64, 256];

/// How `rows` rows are cut into statements: for each, how many rows it takes and its index in
/// [`CHUNKS`].
pub(super) fn chunks(mut rows: usize) -> impl Iterator<Item = (usize, usize)> {
    std::iter::from_fn(move || {
        if rows == 0 {
            return None;
        }
        let chunk = CHUNKS
            .iter()
            .position(|&c| c >= rows)
            .unwrap_or(CHUNKS.len() - 1);
        let taken = rows.min(CHUNKS[chunk]);
        rows -= taken;
        Some((taken, chunk))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_rows_with_few_statements() {
        assert_eq!(chunks(0).count(), 0);
        assert_eq!(chunks(1).collect::<Vec<_>>(), vec![(1, 0)]);
        assert_eq!(chunks(5).collect::<Vec<_>>(), vec![(5, 2)]);
        assert_eq!(chunks(64).collect::<Vec<_>>(), vec![(64, 3)]);
        assert_eq!(chunks(300).collect::<Vec<_>>(), vec![(256, 4), (44, 3)]);
        for rows in 0..=2048 {
            let cut: Vec<(usize, usize)> = chunks(rows).collect();
            assert_eq!(cut.iter().map(|(n, _)| n).sum::<usize>(), rows, "{rows}");
            assert!(cut.iter().all(|&(n, c)| 0 < n && n <= CHUNKS[c]), "{rows}");
            assert!(cut.len() <= rows.div_ceil(256), "{rows}");
        }
    }
}
