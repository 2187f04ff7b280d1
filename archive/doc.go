// Package archive keeps the audit history compressed, so that the volumes
// that hold a day of hot traffic also hold months of history.
//
// E2A_AUDIT copies every request and frame (sourced from E2A_REQUESTS and
// E2A_RESPONSES) as they are; nats-server's stream limits count bytes
// before any storage compression, so its retention is bounded by the
// uncompressed size. The archiver ([Run]) reads E2A_AUDIT in order with an
// ordered consumer and stores its messages in batches on E2A_ARCHIVE's one
// subject (subjects.ArchiveBatches): each batch the zstd of consecutive
// messages (sequence, store time, subject, headers, payload: [Encode]),
// with headers naming the E2A_AUDIT sequences and times it spans. The
// archive's limits count the compressed bytes, and it holds one subject
// whatever its age (no server memory per request). E2A_AUDIT then only
// needs to keep what the archiver has not read yet (hours), and
// E2A_ARCHIVE the history (streams.Config.ArchiveMaxAge, 90 days).
//
// The archiver keeps no state: it resumes after the archive's last batch.
// Each batch is stored with the subject's expected last sequence, so two
// archivers never store the same messages twice (the second is refused
// and reads the archive again). A consumer that delivers nothing for a
// few seconds while E2A_AUDIT holds more (lost with its NATS server, its
// recreation unanswered) is given up: the archiver deletes it and starts
// again after the archive's last batch. A message E2A_AUDIT dropped before
// it was archived is counted (e2a_archive_missed_total) and logged. A
// corrupt last batch (its headers do not read, so it does not say where
// the archive ends; E2A_ARCHIVE denies its deletion) is written past: the
// archiver goes on after the newest sound batch before it, fenced on the
// corrupt one, archiving again from E2A_AUDIT what it may have held
// (e2a_archive_corrupt_batches_total). An archiver that fails without
// progress for WithStallAfter reports it (Health, e2a_archive_stalled_seconds).
//
// A [Reader] finds messages by E2A_AUDIT sequence or store time with a
// binary search over the batches' headers (log2(batches) direct gets) and
// one decompression; it reads around a corrupt batch, reporting the
// sequences only that batch may hold ([UnreadableError]). Package
// internal/audit reads the archive as the part of E2A_AUDIT's sequence
// that E2A_AUDIT no longer holds, so `e2a replay` finds a request of last
// month by the time in its UUIDv7 id.
package archive
