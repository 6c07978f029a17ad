//! The file log's open files (issue 11): a thread's file is open only while it is used,
//! in a small pool, so that a host with many threads (and a restart on them) never runs
//! out of file descriptors. One test in its own binary: it counts the descriptors of the
//! process, which other tests running beside it would change.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use harness_tanstack::agui::AguiEvent;
use harness_tanstack::log::{EventLog, FileLog};

#[cfg(target_os = "linux")]
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[cfg(target_os = "linux")]
#[test]
fn a_file_log_keeps_few_files_open_however_many_threads_it_has() {
    let dir = std::env::temp_dir().join(format!("harness-tanstack-fds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let threads = 300;
    let bound = 40; // the default pool (32) and a few
    let before = open_fds();
    {
        let mut log = FileLog::open(&dir).unwrap();
        for i in 0..threads {
            let t = format!("t-{i}");
            log.set_owner(&t, "ann").unwrap();
            for j in 0..3 {
                log.append(&t, "op", &AguiEvent::text_content("m", format!("{i}.{j}")))
                    .unwrap();
            }
        }
        assert!(open_fds() <= before + bound, "{} open", open_fds() - before);
        // Reading every thread again keeps the pool as small.
        for i in 0..threads {
            let r = log.get(&format!("t-{i}"), 2).unwrap().unwrap();
            assert_eq!(
                r.event().unwrap(),
                AguiEvent::text_content("m", format!("{i}.1"))
            );
        }
        assert!(open_fds() <= before + bound, "{} open", open_fds() - before);
    }
    // A restart on them: opening does not depend on the number of threads.
    let mut log = FileLog::open(&dir).unwrap();
    assert!(open_fds() <= before + bound, "{} open", open_fds() - before);
    assert_eq!(log.threads().len(), threads);
    for i in (0..threads).rev() {
        let t = format!("t-{i}");
        assert_eq!((log.first_seq(&t), log.head_seq(&t)), (1, 3));
        assert_eq!(log.owner(&t).as_deref(), Some("ann"));
        let r = log
            .append(&t, "op", &AguiEvent::text_content("m", "more"))
            .unwrap();
        assert_eq!(r.seq, 4);
        assert_eq!(log.get(&t, 1).unwrap().unwrap().seq, 1);
    }
    assert!(open_fds() <= before + bound, "{} open", open_fds() - before);
    drop(log);
    let _ = std::fs::remove_dir_all(&dir);
}
