-- One ledger database per region; the workers apply the schema migrations themselves at start-up.
CREATE DATABASE hold_sweeper_us;
CREATE DATABASE hold_sweeper_eu;
