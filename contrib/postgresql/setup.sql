-- A role and a database for Switchboard on an existing PostgreSQL server (12 or later).
-- Run as a superuser, with the password of your choice:
--
--   sudo -u postgres psql -v password="'a long random secret'" -f setup.sql
--
-- then point every node at it:
--
--   export SWITCHBOARD_STORE='postgres://switchboard:a%20long%20random%20secret@db.example.com/switchboard'
--
-- Switchboard creates and migrates its own tables at start (under an advisory lock, so
-- nodes started together migrate once). Each node keeps up to 10 connections (8 pooled, one
-- listening for the others' notices, one spare): allow for that in max_connections.

CREATE ROLE switchboard LOGIN PASSWORD :password;
CREATE DATABASE switchboard OWNER switchboard;

\connect switchboard

-- Only Switchboard's role creates objects in its database.
REVOKE ALL ON SCHEMA public FROM PUBLIC;
GRANT ALL ON SCHEMA public TO switchboard;

-- A node that froze inside a transaction must not hold its locks for ever (another node's
-- take-over of it waits on them); Switchboard's own transactions last milliseconds.
ALTER ROLE switchboard SET idle_in_transaction_session_timeout = '60s';
