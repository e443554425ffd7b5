//! Log lines gathered in memory and written in batches, for a server that
//! answers thousands of requests a second with an access line each: one
//! write per batch instead of one system call per line.
//!
//! Each line is appended whole under a lock, so lines never interleave. A
//! background thread writes what has gathered every [`FLUSH_EVERY`]; a
//! batch that outgrows the buffer is written at once by whoever fills it.

use std::io::{self, BufWriter, Write};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;

/// The longest a line waits in memory.
pub const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// A batch is written when it reaches this size, whatever the time.
const BATCH_BYTES: usize = 64 * 1024;

type Shared<W> = Arc<Mutex<BufWriter<W>>>;

/// The writer handed to the subscriber.
pub struct Batched<W: Write> {
    out: Shared<W>,
}

/// Writes what is gathered when dropped; local mode keeps it for the
/// process's life.
pub struct Flush {
    flush: Box<dyn Fn() + Send + Sync>,
}

impl Drop for Flush {
    fn drop(&mut self) {
        (self.flush)();
    }
}

impl Batched<io::Stderr> {
    /// Batches to stderr, flushed by a background thread.
    pub fn stderr() -> (Batched<io::Stderr>, Flush) {
        let (writer, flush) = Batched::new(io::stderr());
        let out = Arc::downgrade(&writer.out);
        // Ends with the writer (never, for the global subscriber's).
        std::thread::Builder::new()
            .name("floe-log-flush".into())
            .spawn(move || {
                while let Some(out) = out.upgrade() {
                    flush_now(&out);
                    drop(out);
                    std::thread::sleep(FLUSH_EVERY);
                }
            })
            .map(drop)
            .unwrap_or_else(|e| eprintln!("floe-telemetry: no log flush thread ({e}); lines are written when a batch fills and at exit"));
        (writer, flush)
    }
}

impl<W: Write + Send + 'static> Batched<W> {
    /// Batches to `out`, flushed only when a batch fills or by the returned
    /// guard (tests flush by hand).
    pub fn new(out: W) -> (Batched<W>, Flush) {
        let out = Arc::new(Mutex::new(BufWriter::with_capacity(BATCH_BYTES, out)));
        let kept = out.clone();
        let flush = Flush {
            flush: Box::new(move || flush_now(&kept)),
        };
        (Batched { out }, flush)
    }
}

fn flush_now<W: Write>(out: &Mutex<BufWriter<W>>) {
    let mut out = out.lock().unwrap_or_else(PoisonError::into_inner);
    // Nowhere to report a failed log write but the log itself.
    let _ = out.flush();
}

/// One line's writer: the subscriber formats a line, then writes it with
/// one `write_all`, which this appends under the lock.
pub struct Line<'a, W: Write> {
    out: &'a Mutex<BufWriter<W>>,
}

impl<W: Write> Write for Line<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.out
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.out
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a, W: Write + 'a> MakeWriter<'a> for Batched<W> {
    type Writer = Line<'a, W>;

    fn make_writer(&'a self) -> Line<'a, W> {
        Line { out: &self.out }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Default)]
    struct Sink {
        bytes: Arc<Mutex<Vec<u8>>>,
        writes: Arc<Mutex<usize>>,
    }

    impl Write for Sink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            *self.writes.lock().expect("not poisoned") += 1;
            self.bytes
                .lock()
                .expect("not poisoned")
                .extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn lines_are_gathered_whole_and_written_in_batches() {
        let sink = Sink::default();
        let (batched, flush) = Batched::new(sink.clone());
        std::thread::scope(|s| {
            for t in 0..4 {
                let batched = &batched;
                s.spawn(move || {
                    for i in 0..500 {
                        let line = format!(
                            "{{\"thread\":{t},\"line\":{i},\"pad\":\"{}\"}}\n",
                            "x".repeat(i % 50)
                        );
                        batched
                            .make_writer()
                            .write_all(line.as_bytes())
                            .expect("appended");
                    }
                });
            }
        });
        drop(flush);
        let text =
            String::from_utf8(sink.bytes.lock().expect("not poisoned").clone()).expect("utf-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2000, "every line, once");
        for line in lines {
            let _: serde_json::Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{line:?} was cut or interleaved: {e}"));
        }
        let writes = *sink.writes.lock().expect("not poisoned");
        assert!(
            writes * 20 < 2000,
            "{writes} writes for 2000 lines: not batched"
        );
    }

    #[test]
    fn nothing_is_written_before_a_flush_unless_a_batch_fills() {
        let sink = Sink::default();
        let (batched, flush) = Batched::new(sink.clone());
        batched
            .make_writer()
            .write_all(b"one line\n")
            .expect("appended");
        assert!(sink.bytes.lock().expect("not poisoned").is_empty());
        drop(flush);
        assert_eq!(&*sink.bytes.lock().expect("not poisoned"), b"one line\n");
    }
}
