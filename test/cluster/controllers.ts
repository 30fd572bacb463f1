/** Which controllers a test control plane runs (control-plane.ts `controllers`). */

/**
 * kube-controller-manager's controllers for a cluster without kubelets: neither the node lifecycle
 * controller (it would taint the Nodes and evict the Pods), nor the DaemonSet controller, which
 * adopts the agent Pods a test makes (they match the rendered DaemonSet's selector) and deletes them
 * (no kubelet reports them, the Node lacks what its nodeSelector asks); the agent's token, bound to
 * its Pod, is refused 60 s after the Pod's deletion deadline.
 */
export const WITHOUT_KUBELET_CONTROLLERS = "*,-node-lifecycle-controller,-daemonset-controller";
