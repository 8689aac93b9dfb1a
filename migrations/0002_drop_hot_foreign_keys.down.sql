ALTER TABLE decisions ADD CONSTRAINT decisions_bandit_fkey FOREIGN KEY (bandit) REFERENCES bandits (name);
ALTER TABLE rewards ADD CONSTRAINT rewards_decision_id_fkey FOREIGN KEY (decision_id) REFERENCES decisions (id);
