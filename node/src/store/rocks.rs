//! The RocksDB engine, the engine Quicksilver later moved to for its lower space use.
//!
//! Three column families; one `WriteBatch` per commit written with `sync = true`, so a commit is
//! atomic across column families and durable when it returns. The `log` column family is not
//! compressed by RocksDB (its values are Snappy-compressed entries already); `kv` uses Snappy.
//!
//! `disk_bytes_written` is RocksDB's own accounting: WAL bytes + flush bytes + compaction bytes
//! written, from its statistics tickers. Block checksums are verified on every read; a failed
//! one surfaces as [`EngineError::Corruption`].

use std::path::Path;

use rocksdb::checkpoint::Checkpoint;
use rocksdb::statistics::Ticker;
use rocksdb::{
    ColumnFamilyDescriptor, DB, DBCompressionType, Direction, ErrorKind, IteratorMode, Options, WriteBatch,
    WriteOptions,
};

use super::engine::{Engine, EngineError, EngineKind, Table, Visit, Write, dir_bytes};

pub(crate) struct RocksEngine {
    db: DB,
    options: Options,
    sync: WriteOptions,
}

fn rocks_error(e: rocksdb::Error) -> EngineError {
    match e.kind() {
        ErrorKind::Corruption => EngineError::Corruption { engine: EngineKind::Rocksdb, detail: e.into_string() },
        _ => EngineError::failed(EngineKind::Rocksdb, e),
    }
}

impl RocksEngine {
    pub(crate) fn open(path: &Path) -> Result<RocksEngine, EngineError> {
        let mut options = Options::default();
        options.create_if_missing(true);
        options.create_missing_column_families(true);
        options.enable_statistics();
        options.set_max_background_jobs(2);
        options.set_keep_log_file_num(2);
        let families = Table::ALL.map(|table| {
            let mut cf = Options::default();
            cf.set_compression_type(match table {
                Table::Log => DBCompressionType::None,
                Table::Meta | Table::Kv => DBCompressionType::Snappy,
            });
            ColumnFamilyDescriptor::new(table.name(), cf)
        });
        let db = DB::open_cf_descriptors(&options, path, families).map_err(|e| {
            EngineError::failed(EngineKind::Rocksdb, format!("opening RocksDB at {}: {e}", path.display()))
        })?;
        let mut sync = WriteOptions::default();
        sync.set_sync(true);
        Ok(RocksEngine { db, options, sync })
    }

    fn cf(&self, table: Table) -> &rocksdb::ColumnFamily {
        self.db.cf_handle(table.name()).expect("column families are created at open")
    }
}

impl Engine for RocksEngine {
    fn kind(&self) -> EngineKind {
        EngineKind::Rocksdb
    }

    fn get(&self, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        self.db.get_cf(self.cf(table), key).map_err(rocks_error)
    }

    fn scan(&self, table: Table, start: &[u8], visit: Visit<'_>) -> Result<(), EngineError> {
        for item in self.db.iterator_cf(self.cf(table), IteratorMode::From(start, Direction::Forward)) {
            let (key, value) = item.map_err(rocks_error)?;
            if !visit(&key, &value) {
                break;
            }
        }
        Ok(())
    }

    fn commit(&mut self, writes: Vec<Write>) -> Result<(), EngineError> {
        let mut batch = WriteBatch::default();
        for write in writes {
            match write {
                Write::Put { table, key, value } => batch.put_cf(self.cf(table), key, value),
                Write::Delete { table, key } => batch.delete_cf(self.cf(table), key),
                Write::DeleteRange { table, start, end } => batch.delete_range_cf(self.cf(table), start, end),
            }
        }
        self.db.write_opt(batch, &self.sync).map_err(rocks_error)
    }

    fn flush(&mut self) -> Result<(), EngineError> {
        for table in Table::ALL {
            self.db.flush_cf(self.cf(table)).map_err(rocks_error)?;
        }
        Ok(())
    }

    fn disk_bytes(&self) -> Result<u64, EngineError> {
        dir_bytes(self.db.path()).map_err(|e| EngineError::failed(EngineKind::Rocksdb, e))
    }

    fn disk_bytes_written(&self) -> u64 {
        [Ticker::WalFileBytes, Ticker::FlushWriteBytes, Ticker::CompactWriteBytes]
            .into_iter()
            .map(|ticker| self.options.get_ticker_count(ticker))
            .sum()
    }

    fn export_native(&self, dir: &Path) -> Result<(), EngineError> {
        // A checkpoint flushes the memtables and hard-links (or copies) the live SST files: a
        // consistent view of all column families that opens without the WAL.
        Checkpoint::new(&self.db).and_then(|c| c.create_checkpoint(dir)).map_err(rocks_error)
    }
}
