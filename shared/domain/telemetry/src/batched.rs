//! Log lines gathered in memory and written in batches, for a server that
//! answers thousands of requests a second with an access line each: one
//! write per batch instead of one system call per line, and none of them
//! on the thread that answers a request.
//!
//! Each line is appended whole under a lock, so lines never interleave. A
//! background thread writes what has gathered every [`FLUSH_EVERY`], or as
//! soon as a batch fills. The line that fills a batch only wakes it: a
//! write of a batch to a slow terminal or pipe would otherwise hold up the
//! request that happened to fill it, and every request waiting for the
//! lock behind it. Only when the thread falls far behind (or there is no
//! thread) does the line's own writer write, so memory stays bounded.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tracing_subscriber::fmt::MakeWriter;

/// The longest a line waits in memory.
pub const FLUSH_EVERY: Duration = Duration::from_millis(100);

/// A batch is written when it reaches this size, whatever the time.
const BATCH_BYTES: usize = 64 * 1024;

/// Past this, lines are written by whoever appends them: the background
/// thread is not keeping up (or there is none to wake).
const MOST_PENDING: usize = 16 * BATCH_BYTES;

/// The lines gathered and the destination, shared by every line's writer,
/// the background thread and the [`Flush`] guard.
struct Shared<W> {
    pending: Mutex<Pending>,
    /// Wakes the background thread when a batch has filled.
    filled: Condvar,
    /// The destination, and the spare buffer a batch is swapped into. Held
    /// while a batch is written, so that batches go out in order.
    out: Mutex<Out<W>>,
    /// Whether a background thread writes batches (else lines' writers do).
    background: AtomicBool,
}

struct Pending {
    lines: Vec<u8>,
    /// The background thread was woken for the batch gathering now.
    woken: bool,
}

struct Out<W> {
    dest: W,
    spare: Vec<u8>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while appending leaves at worst a partial line: keep logging.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<W: Write> Shared<W> {
    fn new(dest: W) -> Shared<W> {
        Shared {
            pending: Mutex::new(Pending {
                lines: Vec::with_capacity(BATCH_BYTES),
                woken: false,
            }),
            filled: Condvar::new(),
            out: Mutex::new(Out {
                dest,
                spare: Vec::with_capacity(BATCH_BYTES),
            }),
            background: AtomicBool::new(false),
        }
    }

    fn append(&self, line: &[u8]) {
        let mut pending = lock(&self.pending);
        pending.lines.extend_from_slice(line);
        let gathered = pending.lines.len();
        if gathered < BATCH_BYTES {
            return;
        }
        if gathered < MOST_PENDING && self.background.load(Ordering::Acquire) {
            if !pending.woken {
                pending.woken = true;
                self.filled.notify_one();
            }
            return;
        }
        drop(pending);
        self.write_out();
    }

    /// Writes what has gathered. The pending lines are swapped for the
    /// spare buffer under the lines' lock, and written under the
    /// destination's only: appending goes on meanwhile.
    fn write_out(&self) {
        let mut out = lock(&self.out);
        let Out { dest, spare } = &mut *out;
        {
            let mut pending = lock(&self.pending);
            pending.woken = false;
            std::mem::swap(&mut pending.lines, spare);
        }
        if spare.is_empty() {
            return;
        }
        // Nowhere to report a failed log write but the log itself.
        let _ = dest.write_all(spare).and_then(|()| dest.flush());
        spare.clear();
        // A burst may have grown the buffer far past a batch: give it back.
        spare.shrink_to(2 * BATCH_BYTES);
    }

    /// Waits until a batch fills or [`FLUSH_EVERY`] passes.
    fn wait_for_lines(&self) {
        let pending = lock(&self.pending);
        if !pending.woken {
            let _ = self.filled.wait_timeout(pending, FLUSH_EVERY);
        }
    }
}

/// The writer handed to the subscriber.
pub struct Batched<W: Write> {
    shared: Arc<Shared<W>>,
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
    /// Batches to stderr, written by a background thread.
    pub fn stderr() -> (Batched<io::Stderr>, Flush) {
        Batched::background(io::stderr())
    }
}

impl<W: Write + Send + 'static> Batched<W> {
    /// Batches to `out`, written by a background thread (see the module's
    /// comment).
    pub fn background(out: W) -> (Batched<W>, Flush) {
        let shared = Arc::new(Shared::new(out));
        let weak = Arc::downgrade(&shared);
        // Ends with the writer (never, for the global subscriber's).
        let started = std::thread::Builder::new()
            .name("floe-log-flush".into())
            .spawn(move || {
                while let Some(shared) = weak.upgrade() {
                    shared.wait_for_lines();
                    shared.write_out();
                }
            });
        match started {
            Ok(_) => shared.background.store(true, Ordering::Release),
            Err(e) => eprintln!(
                "floe-telemetry: no log flush thread ({e}); lines are written when a batch fills and at exit"
            ),
        }
        Batched::with(shared)
    }

    /// Batches to `out`, written only when a batch fills or by the returned
    /// guard (tests flush by hand).
    pub fn new(out: W) -> (Batched<W>, Flush) {
        Batched::with(Arc::new(Shared::new(out)))
    }

    fn with(shared: Arc<Shared<W>>) -> (Batched<W>, Flush) {
        let kept = shared.clone();
        let flush = Flush {
            flush: Box::new(move || kept.write_out()),
        };
        (Batched { shared }, flush)
    }
}

/// One line's writer: the subscriber formats a line, then writes it with
/// one `write_all`, which this appends under the lock.
pub struct Line<'a, W: Write> {
    shared: &'a Shared<W>,
}

impl<W: Write> Write for Line<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.shared.append(buf);
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.shared.append(buf);
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a, W: Write + 'a> MakeWriter<'a> for Batched<W> {
    type Writer = Line<'a, W>;

    fn make_writer(&'a self) -> Line<'a, W> {
        Line {
            shared: &self.shared,
        }
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

    impl Sink {
        fn len(&self) -> usize {
            self.bytes.lock().expect("not poisoned").len()
        }
    }

    /// Waits (at most 5 s) until `done` holds.
    fn eventually(done: impl Fn() -> bool) -> bool {
        let until = std::time::Instant::now() + Duration::from_secs(5);
        while !done() {
            if std::time::Instant::now() > until {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        true
    }

    #[test]
    fn the_background_thread_writes_a_quiet_line_and_a_full_batch() {
        let sink = Sink::default();
        let (batched, _flush) = Batched::background(sink.clone());
        batched
            .make_writer()
            .write_all(b"quiet\n")
            .expect("appended");
        assert!(
            eventually(|| sink.len() == 6),
            "a lone line is written within the flush interval"
        );

        // A full batch is written by the thread, not by the line that
        // filled it: that line's writer returns with nothing written.
        let line = [b'x'; 1023]
            .iter()
            .chain(b"\n")
            .copied()
            .collect::<Vec<u8>>();
        let writes_before = *sink.writes.lock().expect("not poisoned");
        for _ in 0..(BATCH_BYTES / line.len() + 1) {
            batched.make_writer().write_all(&line).expect("appended");
        }
        let total = 6 + (BATCH_BYTES / line.len() + 1) * line.len();
        assert!(eventually(|| sink.len() == total), "the batch was written");
        let writes = *sink.writes.lock().expect("not poisoned") - writes_before;
        assert!(writes <= 3, "{writes} writes for one batch");
    }

    #[test]
    fn lines_keep_their_order_across_batches() {
        let sink = Sink::default();
        let (batched, flush) = Batched::background(sink.clone());
        for i in 0..20_000 {
            batched
                .make_writer()
                .write_all(format!("{i}\n").as_bytes())
                .expect("appended");
        }
        drop(flush);
        let text =
            String::from_utf8(sink.bytes.lock().expect("not poisoned").clone()).expect("utf-8");
        let got: Vec<usize> = text.lines().map(|l| l.parse().expect("a number")).collect();
        assert_eq!(got, (0..20_000).collect::<Vec<_>>());
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
