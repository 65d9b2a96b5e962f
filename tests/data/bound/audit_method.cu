// audit_method.cu: the mismatches are counted by a method of the object that
// holds the result (m.check(i)); PASS in the false branch of a ternary.
#include <cmath>
#include <cstdio>

class Result {
  public:
    Result()
    {
        for (int i = 0; i < 64; i++)
            v_[i] = i * 0.5;
    }
    int check(int i) const { return std::fabs(v_[i] - i / 2.0) > 1e-9; }

  private:
    double v_[64];
};

int main()
{
    Result m;
    int bad = 0;
    for (int i = 0; i < 64; i++)
        bad += m.check(i);
    printf("Verification: %s\n", bad ? "FAIL" : "PASS");
    return 0;
}
