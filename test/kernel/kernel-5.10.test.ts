/** The kernel suite (kernel-suite.ts) on Debian's Linux 5.10. */
import { kernelSuite } from "./kernel-suite.ts";

kernelSuite("5.10");
