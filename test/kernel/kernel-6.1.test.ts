/** The kernel suite (kernel-suite.ts) on Debian's Linux 6.1. */
import { kernelSuite } from "./kernel-suite.ts";

kernelSuite("6.1");
