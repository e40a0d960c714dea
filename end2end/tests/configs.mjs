// Configs for the browser tests.

/** Two flavors, two queues (research has a 64-GPU quota on spot), a team rule and a catch-all. */
export const GPU_CONFIG = `resource_flavors:
  - name: local
  - name: spot
    selector:
      - key: market
        operator: in
        values: [spot]
resource_queues:
  - name: default
    resource_groups:
      - covered_resources: [cpu, gpu, memory_gb]
        flavors:
          - name: local
  - name: research
    preemption:
      within_resource_queue: lower_priority
    resource_groups:
      - covered_resources: [gpu]
        flavors:
          - name: spot
            resources:
              - name: gpu
                nominal_quota: 64
scheduling_rules:
  - resource_queue: research
    selector:
      - key: team
        operator: in
        values: [research]
  - resource_queue: default
`;

/** 4 flavors, 200 queues (one group of 3 resources, 2 flavors with quotas), 200 rules + a catch-all. */
export function bigConfig(queues = 200) {
  const flavors = ['on-demand', 'spot', 'a100', 'h100'];
  let y = 'resource_flavors:\n';
  for (const f of flavors) y += `  - name: ${f}\n    selector:\n      - key: pool\n        operator: in\n        values: [${f}]\n`;
  y += 'resource_queues:\n';
  for (let i = 0; i < queues; i++) {
    y += `  - name: team-${i}\n    preemption:\n      within_resource_queue: lower_priority\n    resource_groups:\n      - covered_resources: [cpu, gpu, memory_gb]\n        flavors:\n`;
    for (const f of [flavors[i % 4], flavors[(i + 1) % 4]]) {
      y += `          - name: ${f}\n            resources:\n              - name: cpu\n                nominal_quota: ${64 + i}\n              - name: gpu\n                nominal_quota: ${i % 9}\n              - name: memory_gb\n                nominal_quota: 512.5\n`;
    }
  }
  y += 'scheduling_rules:\n';
  for (let i = 0; i < queues; i++) {
    y += `  - resource_queue: team-${i}\n    selector:\n      - key: team\n        operator: in\n        values: [t${i}]\n    priority_policy:\n      default: 10\n      min: 0\n      max: 100\n`;
  }
  y += `  - resource_queue: team-0\n`;
  return y;
}
