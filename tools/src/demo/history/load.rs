//! Bulk loading of generated rows through `LOAD DATA LOCAL INFILE`: the rows go to MariaDB as
//! tab-separated text streamed over the connection. A prepared `INSERT` of a thousand rows binds 44,000
//! parameters, and MariaDB spent most of a long history's load setting them up and clearing them
//! (`Item_param`, `cleanup_items`, `setup_fields` in a profile); `LOAD DATA` stores fields straight into
//! the record. sqlx cannot answer the server's request for the file's bytes, so the loads use
//! mysql_async, whose connections can.

use std::io;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, Result, ensure};
use mysql_async::prelude::Queryable as _;
use sqlx::MySql;
use tokio::sync::mpsc;

use super::write::RowSink;

/// A value written as `LOAD DATA` reads a field with its default options: tabs between fields,
/// newlines between rows, a backslash escaping, `\N` for NULL.
pub(super) trait TsvValue {
    fn write_tsv(&self, out: &mut Vec<u8>) -> Result<()>;
}

macro_rules! tsv_display {
    ($($t:ty),*) => {$(
        impl TsvValue for $t {
            fn write_tsv(&self, out: &mut Vec<u8>) -> Result<()> {
                use std::io::Write as _;
                write!(out, "{self}")?;
                Ok(())
            }
        }
    )*};
}
// f64's Display is the shortest text that reads back as the same double.
tsv_display!(u8, u16, u32, u64, i8, i16, i32, i64, f64);

/// The generated text is ASCII, checked here: it reads the same in every character set a slurmdbd
/// table may use, so the loads declare latin1 (slurmdbd's tables' own) and MariaDB converts nothing.
impl TsvValue for &str {
    fn write_tsv(&self, out: &mut Vec<u8>) -> Result<()> {
        ensure!(self.is_ascii(), "generated text must be ASCII: {self:?}");
        for &byte in self.as_bytes() {
            match byte {
                b'\\' => out.extend_from_slice(b"\\\\"),
                b'\t' => out.extend_from_slice(b"\\t"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                0 => out.extend_from_slice(b"\\0"),
                _ => out.push(byte),
            }
        }
        Ok(())
    }
}

impl TsvValue for String {
    fn write_tsv(&self, out: &mut Vec<u8>) -> Result<()> {
        self.as_str().write_tsv(out)
    }
}

impl<T: TsvValue> TsvValue for Option<T> {
    fn write_tsv(&self, out: &mut Vec<u8>) -> Result<()> {
        match self {
            Some(value) => value.write_tsv(out),
            None => {
                out.extend_from_slice(b"\\N");
                Ok(())
            }
        }
    }
}

/// Rows as `LOAD DATA` text, a chunk at a time.
#[derive(Default)]
pub(super) struct TsvRows {
    bytes: Vec<u8>,
    rows: u64,
    /// The current row has a field already: the next one follows a tab.
    row_open: bool,
}

impl TsvRows {
    pub(super) fn rows(&self) -> u64 {
        self.rows
    }
}

impl RowSink for TsvRows {
    fn value<'q, T>(&mut self, value: T) -> Result<()>
    where
        T: 'q + sqlx::Encode<'q, MySql> + sqlx::Type<MySql> + TsvValue,
    {
        if self.row_open {
            self.bytes.push(b'\t');
        }
        self.row_open = true;
        value.write_tsv(&mut self.bytes)
    }

    fn end_row(&mut self) {
        self.bytes.push(b'\n');
        self.rows += 1;
        self.row_open = false;
    }
}

/// The `LOAD DATA` statement that fills `table` as `INSERT INTO table (cols) VALUES tuple` would: the
/// tuple's `?` columns come from the text, in order; its literals are set on every row.
pub(super) fn load_sql(table: &str, cols: &str, tuple: &str) -> String {
    let values = tuple.trim().trim_start_matches('(').trim_end_matches(')').split(',').map(str::trim);
    let (mut read, mut set) = (Vec::new(), Vec::new());
    for (column, value) in cols.split(',').map(str::trim).zip(values) {
        match value {
            "?" => read.push(column.to_string()),
            literal => set.push(format!("{column} = {literal}")),
        }
    }
    let mut sql =
        format!("LOAD DATA LOCAL INFILE 'rows' INTO TABLE `{table}` CHARACTER SET latin1 ({})", read.join(", "));
    if !set.is_empty() {
        sql.push_str(" SET ");
        sql.push_str(&set.join(", "));
    }
    sql
}

/// Opens the loads' connections (as the seeder, the same user as the pool's).
#[derive(Clone)]
pub struct Loader {
    opts: mysql_async::Opts,
}

impl Loader {
    pub fn new(url: &str) -> Result<Self> {
        let opts = mysql_async::Opts::from_url(url).context("the seeder's URL, for bulk loads")?;
        Ok(Loader { opts })
    }

    /// A connection in a transaction of its own, set for a bulk load: the rows are unique by
    /// construction (unique keys need no lookup per row) and slurmdbd's tables declare no foreign keys.
    pub(super) async fn begin(&self) -> Result<BulkTx> {
        let mut conn = mysql_async::Conn::new(self.opts.clone()).await.context("connecting for a bulk load")?;
        conn.query_drop("SET SESSION unique_checks = 0, foreign_key_checks = 0").await?;
        conn.query_drop("START TRANSACTION").await?;
        Ok(BulkTx { conn })
    }
}

/// A bulk load's transaction; dropped without [`BulkTx::commit`], its connection goes and MariaDB
/// rolls it back.
pub(super) struct BulkTx {
    conn: mysql_async::Conn,
}

impl BulkTx {
    /// Loads the chunks from `chunks` into `table` (columns as [`load_sql`] reads them) in one
    /// statement, and checks that MariaDB took every row as sent: `LOCAL` turns a duplicate key or a
    /// value that does not fit into a warning and a skipped or altered row.
    pub(super) async fn load(
        &mut self,
        table: &str,
        cols: &str,
        tuple: &str,
        chunks: mpsc::Receiver<Result<TsvRows>>,
    ) -> Result<u64> {
        let sent = std::sync::Arc::new(AtomicU64::new(0));
        let counted = std::sync::Arc::clone(&sent);
        let stream = futures::stream::unfold(chunks, move |mut chunks| {
            let counted = std::sync::Arc::clone(&counted);
            async move {
                let chunk = chunks.recv().await?;
                let bytes = chunk
                    .map(|rows| {
                        counted.fetch_add(rows.rows(), Ordering::Relaxed);
                        bytes::Bytes::from(rows.bytes)
                    })
                    .map_err(|error| io::Error::other(format!("{error:#}")));
                Some((bytes, chunks))
            }
        });
        // The handler must be Sync; the stream is handed over once, through a lock.
        let data: Mutex<Option<mysql_async::InfileData>> = Mutex::new(Some(Box::pin(stream)));
        self.conn.set_infile_handler(async move {
            let taken = data.lock().map_err(|_| io::Error::other("poisoned"))?.take();
            taken.ok_or_else(|| io::Error::other("the rows were already sent").into())
        });
        self.conn.query_drop(load_sql(table, cols, tuple)).await.with_context(|| format!("loading {table}"))?;
        let (loaded, warnings, sent) =
            (self.conn.affected_rows(), self.conn.get_warnings(), sent.load(Ordering::Relaxed));
        if warnings > 0 {
            let shown: Vec<(String, u32, String)> = self.conn.query("SHOW WARNINGS LIMIT 3").await?;
            anyhow::bail!("loading {table}: {warnings} warnings, such as {shown:?}");
        }
        ensure!(loaded == sent, "loading {table}: MariaDB took {loaded} of the {sent} rows sent");
        Ok(loaded)
    }

    /// Loads a few rows at once (events, batch scripts).
    pub(super) async fn load_rows(&mut self, table: &str, cols: &str, tuple: &str, rows: TsvRows) -> Result<u64> {
        let (sender, receiver) = mpsc::channel(1);
        sender.try_send(Ok(rows)).map_err(|_| anyhow::anyhow!("queueing the rows of {table}"))?;
        drop(sender);
        self.load(table, cols, tuple, receiver).await
    }

    pub(super) async fn execute(&mut self, sql: &str) -> Result<()> {
        self.conn.query_drop(sql).await?;
        Ok(())
    }

    /// The first free `job_db_inx` of `job_table`, as this transaction sees it.
    pub(super) async fn next_inx(&mut self, job_table: &str) -> Result<u64> {
        let max: Option<Option<u64>> =
            self.conn.query_first(format!("SELECT MAX(job_db_inx) FROM `{job_table}`")).await?;
        Ok(max.flatten().unwrap_or(0) + 1)
    }

    pub(super) async fn commit(mut self) -> Result<()> {
        self.conn.query_drop("COMMIT").await?;
        self.conn.disconnect().await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_reads_the_tuples_placeholders_and_sets_its_literals() {
        let sql = load_sql("t", "a, b, `partition`, d", "(?,0,?,'')");
        assert_eq!(
            sql,
            "LOAD DATA LOCAL INFILE 'rows' INTO TABLE `t` CHARACTER SET latin1 (a, `partition`) SET b = 0, d = ''"
        );
    }

    #[test]
    fn text_fields_escape_what_load_data_reads_as_syntax() {
        let mut rows = TsvRows::default();
        rows.value("a\tb\\c\nd").expect("a value");
        rows.value(None::<&str>).expect("a value");
        rows.value(2.5f64).expect("a value");
        rows.end_row();
        assert_eq!(rows.bytes, b"a\\tb\\\\c\\nd\t\\N\t2.5\n");
        assert_eq!(rows.rows(), 1);
        assert!(rows.value("café").is_err(), "text that is not ASCII is refused");
    }
}
