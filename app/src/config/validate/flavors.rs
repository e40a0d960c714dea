//! The `resource_flavors` section: names, selectors, use by queues, and (with nodes) whether
//! a flavor selects any node at all.

use super::Checker;
use crate::config::model::ResourceFlavor;
use crate::config::selector;

impl<'a> Checker<'a> {
    pub(super) fn flavors(&mut self) {
        for (i, flavor) in self.cfg.flavors().iter().enumerate() {
            self.flavor(i, flavor);
        }
    }

    fn flavor(&mut self, i: usize, flavor: &'a ResourceFlavor) {
        let path = format!("resource_flavors[{i}]");
        let name = flavor.name.as_str();
        let first = self.flavor_index.get(name).copied();
        if !super::is_blank(name) && first == Some(i) && !self.used_flavors.contains(name) {
            self.warning(&path, format!("flavor `{name}` is not used by any queue"));
        }
        self.unique_name(format!("{path}.name"), "flavor", name, i, first);
        self.selector(&format!("{path}.selector"), flavor.selector.as_deref());
        if let Some(nodes) = self.nodes {
            let matched = nodes.iter().filter(|n| selector::matches(flavor.selector.as_deref(), &n.labels)).count();
            if matched == 0 {
                let at = match flavor.selector {
                    Some(_) => format!("{path}.selector"),
                    None => path,
                };
                let known = match nodes.len() {
                    0 => "any node (none are known)".to_string(),
                    1 => "the only known node".to_string(),
                    n => format!("any of the {n} known nodes"),
                };
                self.warning(at, format!("flavor `{name}` does not match {known}, so it has no capacity"));
            }
        }
    }
}
