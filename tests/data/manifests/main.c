/* main.c: test data, the source file the manifests of this folder name. */
int main(void) { return 0; }
