//! Where `tokenscope collect` keeps real users' turns: SQLite (WAL, synchronous
//! commits), one row per turn. A batch is acknowledged only after its transaction
//! commits, so a collector killed at any moment loses nothing it acknowledged.

use std::path::Path;

use rusqlite::{Connection, params};
use tokenscope_core::rum::summary::StoredTurn;
use tokenscope_core::rum::{Outcome, Turn, TurnTimes};

/// Errors of the store (the file, SQLite).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite refused an operation.
    #[error("the turn store {path}: {source}")]
    Sqlite {
        /// The database file.
        path: String,
        /// SQLite's error.
        source: rusqlite::Error,
    },
}

/// The database of turns.
pub struct Store {
    conn: Connection,
    path: String,
}

const COLUMNS: &str = "received_unix_ms, started_unix_ms, route, browser, outcome, error_kind,
    hidden, restored, weight, paint_method, clamped, chunks, events, chars, paints,
    chunks_merged, stalls_250, stalls_500, stalls_1000, longest_gap_ms,
    longest_paint_gap_ms, input_tokens, output_tokens, headers_ms, first_byte_ms,
    first_chunk_ms, first_dom_ms, first_paint_ms, last_chunk_ms, last_paint_ms, last_byte_ms,
    chunk_ms, server_prefill_ms, input_to_fetch_ms, long_frames, blocking_ms";

/// Columns added after the first release, with their types and what a turn
/// stored before them reads as: a store made before them gains them when it is
/// opened for writing, and reads as if it had them when opened to read.
const ADDED: [(&str, &str, &str); 5] = [
    ("chunk_ms", "TEXT", "NULL"),
    ("server_prefill_ms", "REAL", "NULL"),
    ("input_to_fetch_ms", "REAL", "NULL"),
    ("long_frames", "INTEGER NOT NULL DEFAULT 0", "0"),
    ("blocking_ms", "REAL NOT NULL DEFAULT 0", "0"),
];

/// The `turns` table's column names.
fn column_names(conn: &Connection) -> rusqlite::Result<Vec<String>> {
    conn.prepare("SELECT name FROM pragma_table_info('turns')")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
}

impl Store {
    /// Opens (or creates) the database at `path`.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let shown = path.display().to_string();
        let err = |source| StoreError::Sqlite {
            path: shown.clone(),
            source,
        };
        let conn = Connection::open(path).map_err(err)?;
        conn.execute_batch(
            "PRAGMA busy_timeout = 5000;
             PRAGMA journal_mode = WAL;
             PRAGMA synchronous = FULL;
             CREATE TABLE IF NOT EXISTS turns (
                 id INTEGER PRIMARY KEY,
                 received_unix_ms REAL NOT NULL,
                 started_unix_ms REAL NOT NULL,
                 route TEXT NOT NULL,
                 browser TEXT NOT NULL,
                 outcome TEXT NOT NULL,
                 error_kind TEXT,
                 hidden INTEGER NOT NULL,
                 restored INTEGER NOT NULL,
                 weight REAL NOT NULL,
                 paint_method TEXT NOT NULL,
                 clamped INTEGER NOT NULL,
                 chunks INTEGER NOT NULL,
                 events INTEGER NOT NULL,
                 chars INTEGER NOT NULL,
                 paints INTEGER NOT NULL,
                 chunks_merged INTEGER NOT NULL,
                 stalls_250 INTEGER NOT NULL,
                 stalls_500 INTEGER NOT NULL,
                 stalls_1000 INTEGER NOT NULL,
                 longest_gap_ms REAL NOT NULL,
                 longest_paint_gap_ms REAL NOT NULL,
                 input_tokens INTEGER,
                 output_tokens INTEGER,
                 headers_ms REAL, first_byte_ms REAL, first_chunk_ms REAL,
                 first_dom_ms REAL, first_paint_ms REAL, last_chunk_ms REAL,
                 last_paint_ms REAL, last_byte_ms REAL,
                 chunk_ms TEXT, server_prefill_ms REAL, input_to_fetch_ms REAL,
                 long_frames INTEGER NOT NULL DEFAULT 0, blocking_ms REAL NOT NULL DEFAULT 0
             );
             CREATE INDEX IF NOT EXISTS turns_received ON turns (received_unix_ms);",
        )
        .map_err(err)?;
        let have = column_names(&conn).map_err(err)?;
        for (name, kind, _) in ADDED {
            if !have.iter().any(|h| h == name) {
                conn.execute_batch(&format!("ALTER TABLE turns ADD COLUMN {name} {kind}"))
                    .map_err(err)?;
            }
        }
        Ok(Store { conn, path: shown })
    }

    /// Opens an existing database to read (`collect --summary`): nothing is created
    /// or changed, whatever file it is.
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        let shown = path.display().to_string();
        let conn = Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .and_then(|c| {
                c.busy_timeout(std::time::Duration::from_secs(5))
                    .map(|()| c)
            })
            .map_err(|source| StoreError::Sqlite {
                path: shown.clone(),
                source,
            })?;
        Ok(Store { conn, path: shown })
    }

    fn err(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// Stores the turns of one batch in one transaction (all or none).
    pub fn insert(
        &mut self,
        received_unix_ms: f64,
        browser: &str,
        turns: &[Turn],
    ) -> Result<(), StoreError> {
        let path = self.path.clone();
        let err = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(err)?;
        {
            let sql = format!(
                "INSERT INTO turns ({COLUMNS}) VALUES ({})",
                vec!["?"; 36].join(", ")
            );
            let mut stmt = tx.prepare_cached(&sql).map_err(err)?;
            for t in turns {
                let m = &t.ms;
                stmt.execute(params![
                    received_unix_ms,
                    t.started_unix_ms,
                    t.route,
                    browser,
                    t.outcome.as_str(),
                    t.error_kind,
                    t.hidden,
                    t.restored,
                    t.weight,
                    t.paint_method,
                    t.clamped as i64,
                    t.chunks as i64,
                    t.events as i64,
                    t.chars as i64,
                    t.paints as i64,
                    t.chunks_merged as i64,
                    t.stalls_250 as i64,
                    t.stalls_500 as i64,
                    t.stalls_1000 as i64,
                    t.longest_gap_ms,
                    t.longest_paint_gap_ms,
                    t.input_tokens.map(|v| v as i64),
                    t.output_tokens.map(|v| v as i64),
                    m.headers,
                    m.first_byte,
                    m.first_chunk,
                    m.first_dom,
                    m.first_paint,
                    m.last_chunk,
                    m.last_paint,
                    m.last_byte,
                    (!t.chunk_ms.is_empty())
                        .then(|| serde_json::to_string(&t.chunk_ms).expect("numbers serialize")),
                    t.server_prefill_ms,
                    t.input_to_fetch_ms,
                    t.long_frames as i64,
                    t.blocking_ms,
                ])
                .map_err(err)?;
            }
        }
        tx.commit().map_err(err)
    }

    /// Deletes turns received before `cutoff_unix_ms`; returns how many.
    pub fn expire(&self, cutoff_unix_ms: f64) -> Result<usize, StoreError> {
        self.conn
            .execute(
                "DELETE FROM turns WHERE received_unix_ms < ?1",
                [cutoff_unix_ms],
            )
            .map_err(|e| self.err(e))
    }

    /// Turns received at or after `since_unix_ms`, oldest first.
    #[cfg(test)]
    pub fn turns(&self, since_unix_ms: f64) -> Result<Vec<StoredTurn>, StoreError> {
        self.turns_between(since_unix_ms, f64::INFINITY)
    }

    /// Turns received in `since_unix_ms..until_unix_ms`, oldest first.
    pub fn turns_between(
        &self,
        since_unix_ms: f64,
        until_unix_ms: f64,
    ) -> Result<Vec<StoredTurn>, StoreError> {
        // A store from before a column (opened read-only, so not migrated) reads
        // that column's default.
        let have = column_names(&self.conn).map_err(|e| self.err(e))?;
        let columns: Vec<String> = COLUMNS
            .split(',')
            .map(str::trim)
            .map(|c| match ADDED.iter().find(|a| a.0 == c) {
                Some((_, _, default)) if !have.iter().any(|h| h == c) => default.to_string(),
                _ => c.to_string(),
            })
            .collect();
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {} FROM turns WHERE received_unix_ms >= ?1 AND received_unix_ms < ?2
                 ORDER BY id",
                columns.join(", ")
            ))
            .map_err(|e| self.err(e))?;
        let until = until_unix_ms.min(f64::MAX);
        let rows = stmt
            .query_map(params![since_unix_ms, until], |r| {
                let outcome = match r.get::<_, String>(4)?.as_str() {
                    "aborted" => Outcome::Aborted,
                    "error" => Outcome::Error,
                    _ => Outcome::Complete,
                };
                let n = |i: usize| r.get::<_, i64>(i).map(|v| v.max(0) as u64);
                let opt = |i: usize| {
                    r.get::<_, Option<i64>>(i)
                        .map(|v| v.map(|v| v.max(0) as u64))
                };
                Ok(StoredTurn {
                    browser: r.get(3)?,
                    turn: Turn {
                        started_unix_ms: r.get(1)?,
                        route: r.get(2)?,
                        outcome,
                        error_kind: r.get(5)?,
                        hidden: r.get(6)?,
                        restored: r.get(7)?,
                        weight: r.get(8)?,
                        paint_method: r.get(9)?,
                        clamped: n(10)?,
                        chunks: n(11)?,
                        events: n(12)?,
                        chars: n(13)?,
                        paints: n(14)?,
                        chunks_merged: n(15)?,
                        stalls_250: n(16)?,
                        stalls_500: n(17)?,
                        stalls_1000: n(18)?,
                        longest_gap_ms: r.get(19)?,
                        longest_paint_gap_ms: r.get(20)?,
                        input_tokens: opt(21)?,
                        output_tokens: opt(22)?,
                        ms: TurnTimes {
                            headers: r.get(23)?,
                            first_byte: r.get(24)?,
                            first_chunk: r.get(25)?,
                            first_dom: r.get(26)?,
                            first_paint: r.get(27)?,
                            last_chunk: r.get(28)?,
                            last_paint: r.get(29)?,
                            last_byte: r.get(30)?,
                        },
                        // A store's own column: written by `insert` only.
                        chunk_ms: r
                            .get::<_, Option<String>>(31)?
                            .and_then(|j| serde_json::from_str(&j).ok())
                            .unwrap_or_default(),
                        server_prefill_ms: r.get(32)?,
                        input_to_fetch_ms: r.get(33)?,
                        long_frames: n(34)?,
                        blocking_ms: r.get(35)?,
                    },
                })
            })
            .map_err(|e| self.err(e))?;
        rows.collect::<Result<Vec<_>, _>>().map_err(|e| self.err(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(first_paint: f64) -> Turn {
        let batch = format!(
            r#"{{"schema":"tokenscope.rum/1","turns":[{{"route":"/v1/chat/completions","started_unix_ms":1.7e12,
            "ms":{{"headers":30,"first_byte":31,"first_chunk":31.5,"first_dom":32,"first_paint":{first_paint},"last_chunk":300,"last_paint":310,"last_byte":301}},
            "chunks":10,"events":12,"chars":200,"paints":9,"chunks_merged":1,"stalls_250":0,"stalls_500":0,"stalls_1000":0,
            "longest_gap_ms":40,"longest_paint_gap_ms":45,"outcome":"complete","hidden":false,"restored":false,
            "paint_method":"raf+task","output_tokens":10,"weight":1,
            "chunk_ms":[31.5,60,90,120,150,180,210,240,270,300],"server_prefill_ms":20.5}}]}}"#
        );
        let b: tokenscope_core::rum::Batch = serde_json::from_str(&batch).unwrap();
        b.turns[0].clone()
    }

    #[test]
    fn turns_read_back_as_written_and_survive_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rum.sqlite");
        let mut s = Store::open(&path).unwrap();
        s.insert(1000.0, "Chrome 131", &[turn(48.0), turn(52.0)])
            .unwrap();
        s.insert(2000.0, "Firefox 133", &[turn(60.0)]).unwrap();
        drop(s);
        let s = Store::open(&path).unwrap();
        let all = s.turns(0.0).unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(all[0].turn, turn(48.0));
        assert_eq!(all[2].browser, "Firefox 133");
        assert_eq!(s.turns(1500.0).unwrap().len(), 1);
        assert_eq!(s.expire(1500.0).unwrap(), 2);
        assert_eq!(s.turns(0.0).unwrap().len(), 1);
        assert_eq!(s.turns_between(0.0, 1500.0).unwrap().len(), 0);
    }

    /// A store made before `chunk_ms` and `server_prefill_ms` gains the columns
    /// and keeps its turns.
    #[test]
    fn an_older_store_gains_the_new_columns() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.sqlite");
        let s = Store::open(&path).unwrap();
        s.conn
            .execute_batch(
                "ALTER TABLE turns DROP COLUMN chunk_ms; ALTER TABLE turns DROP COLUMN server_prefill_ms;
                 ALTER TABLE turns DROP COLUMN input_to_fetch_ms; ALTER TABLE turns DROP COLUMN long_frames;
                 ALTER TABLE turns DROP COLUMN blocking_ms;",
            )
            .unwrap();
        let mut old = turn(48.0);
        (old.chunk_ms, old.server_prefill_ms) = (Vec::new(), None);
        // A turn stored by the older collector.
        s.conn
            .execute_batch(
                "INSERT INTO turns (received_unix_ms, started_unix_ms, route, browser, outcome,
                 hidden, restored, weight, paint_method, clamped, chunks, events, chars, paints,
                 chunks_merged, stalls_250, stalls_500, stalls_1000, longest_gap_ms,
                 longest_paint_gap_ms, output_tokens, headers_ms, first_byte_ms, first_chunk_ms,
                 first_dom_ms, first_paint_ms, last_chunk_ms, last_paint_ms, last_byte_ms)
                 VALUES (500, 1.7e12, '/v1/chat/completions', 'Chrome 131', 'complete', 0, 0, 1,
                 'raf+task', 0, 10, 12, 200, 9, 1, 0, 0, 0, 40, 45, 10, 30, 31, 31.5, 32, 48, 300,
                 310, 301)",
            )
            .unwrap();
        drop(s);
        // Read as it is (no migration), then migrated by a writer.
        let r = Store::open_read_only(&path).unwrap();
        assert_eq!(r.turns(0.0).unwrap()[0].turn, old);
        drop(r);
        let mut s = Store::open(&path).unwrap();
        s.insert(1000.0, "Chrome 131", &[turn(48.0)]).unwrap();
        let all = s.turns(0.0).unwrap();
        assert_eq!((&all[0].turn, &all[1].turn), (&old, &turn(48.0)));
    }
}
