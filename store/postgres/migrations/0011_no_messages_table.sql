-- 0011: the messages table is dropped. Every message it held is in the
-- thread's log too, as the message_posted event written in the same
-- statement (events: seq, message = the message's number, text, at =
-- posted_at), and no statement of the Store ever read it: it was a second
-- copy, written by every post (a row and its primary key's index entry)
-- and read by nobody. A post is now its thread row's UPDATE and its event
-- (store/postgres/BENCH.md, "The messages table").
DROP TABLE IF EXISTS messages;
