-- Resource history records what each queue borrowed from its cohort (usage above nominal).
ALTER TABLE resource_samples ADD COLUMN borrowed_milli BIGINT NOT NULL DEFAULT 0;
